"""Which points `tvr run` measures: a named suite or a suite file, then the overrides its
options ask for (experiments.overrides), their files checked before anything is measured
(a bad file is bad input naming file and line)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import BadInput

if TYPE_CHECKING:
    from experiments.overrides import Override
    from experiments.spec import Point


def check_suite(suite: str) -> None:
    import experiments

    names = experiments.suite_names()
    if suite in experiments.SEARCHES:
        raise BadInput(f"{suite!r} is a tuning search, not a suite: `tvr tune {suite}` runs "
                       "its trials")
    if suite in experiments.RETIRED:
        raise BadInput(f"suite {suite!r} is retired: {experiments.RETIRED[suite]} (its "
                       "committed rows are kept for the report)")
    if suite not in names:
        raise BadInput(f"unknown suite {suite!r}; valid: {', '.join(names)} (`tvr suites` "
                       "describes them)")


def suite_points(suite: str | None, suite_file: str | None) -> tuple[str, str, list[Point]]:
    """(name, description, points) of a named suite or of a suite file, checked before
    anything runs."""
    if (suite is None) == (suite_file is None):
        raise BadInput("name a SUITE (`tvr suites` lists them) or give --suite-file FILE.toml"
                       if suite is None else f"SUITE {suite!r} and --suite-file: give one")
    if suite is not None:
        import experiments

        suite = experiments.current_name(suite)
        check_suite(suite)
        return suite, experiments.describe(suite), experiments.points(suite)
    from experiments.spec import TrainOptions
    from experiments.suitefile import load
    from harness.train.train_runner import train_spec

    try:
        name, description, points = load(suite_file)
        for p in points:  # tasks are the harness's: checked here, before the first point
            if isinstance(p.options, TrainOptions):  # train and the probes of training
                train_spec(p)
    except ValueError as exc:  # SuiteFileError names the file; a task error gets it here
        msg = str(exc)
        raise BadInput(msg if msg.startswith("suite file") else
                       f"suite file {suite_file}: [grid.train]: {msg}") from None
    return name, description, points


def chosen_points(points: list[Point], suite: str, only: tuple[str, ...], corpus: str | None,
                  bitext: tuple[str, ...], reverse: bool, dtype: str | None, compile_: bool,
                  sets: tuple[str, ...]) -> tuple[list[Point], str]:
    """The points with the options' overrides applied, and their stored name: the suite's,
    or for overrides that change what is measured its variant's (`<suite>/variants/<name>`:
    harness.results.variant_name)."""
    from experiments import overrides as o
    from harness.variants import variant_name

    try:
        chosen: list[Override] = [o.Only(only)] if only else []
        if corpus is not None:  # the path becomes a knob of the corpus-task points
            check_utf8(corpus)
            chosen.append(o.Corpus(str(Path(corpus).resolve()), Path(corpus).stem))
        if bitext or reverse:
            chosen.append(_bitext(points, bitext, reverse))
        chosen += [o.DType(dtype)] if dtype is not None else []
        chosen += [o.Compiled()] if compile_ else []
        chosen += [o.Set.parse(s) for s in sets]
        points, variant = o.apply(points, chosen, suite)
        return points, variant_name(suite, variant)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def _bitext(points: list[Point], bitext: tuple[str, ...], reverse: bool) -> Override:
    """The corpus choice of translation points: its files checked whole (every line) and
    named, where the suite has translation points at all."""
    from experiments.overrides import Bitext
    from experiments.spec import TranslateOptions
    from harness.inputs import resolved
    from harness.train.translation.bitext import user_corpus

    paths = tuple(str(resolved(p, "--bitext")) for p in bitext)
    if not paths or not any(isinstance(p.options, TranslateOptions) for p in points):
        return Bitext(paths, reverse)  # its check says what is wrong, if anything
    return Bitext(paths, reverse, user_corpus(paths, reverse).name)  # validates every line


def check_utf8(path: str) -> None:
    """A corpus must be a regular file of UTF-8 text with something in it: a FIFO would
    block the read forever, and an empty or binary file would give a column of error rows."""
    from harness.inputs import read_bounded
    from harness.train.translation.bitext import MAX_CORPUS_BYTES

    try:
        text = read_bounded(path, MAX_CORPUS_BYTES, "--corpus").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"--corpus {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") \
            from None
    except OSError as exc:
        raise BadInput(f"--corpus {path}: cannot be read ({exc.strerror})") from None
    if not text.strip():
        raise BadInput(f"--corpus {path}: the file is empty")
