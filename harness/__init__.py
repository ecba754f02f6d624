"""Measuring, running, tracking and plotting; knows nothing about one model's internals."""
