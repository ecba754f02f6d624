"""Tracking: MLflow as a sink beside the results CSV.

The sweep (harness.run) feeds it; nothing here imports the sweep. store.py and
sqlitefile.py check and create the store, client.py opens MLflow's client quietly,
tracker.py records a sweep's runs, names.py names them, values.py turns rows and facts into
params, metrics and tags (by the row's parts, harness.schema), sync.py rebuilds runs from
the CSVs, ui.py serves MLflow's UI.
"""
