"""Fixtures shared by the harness tests."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """Tiny models gain nothing from intra-op threads, and on a shared, oversubscribed CPU
    OpenMP's spinning workers made the training tests ~50x slower."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
