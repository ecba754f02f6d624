"""Everything Table 1 needs, for four layer types: counted FLOPs and time over n and d (and
kernel k, window r), sequential ops and path length over n, saved memory over n, and time at
a fixed token count. Under 3 minutes on 2 cores."""

from __future__ import annotations

from experiments.spec import PathOptions, Point, config
from models import catalog


def layers() -> dict[str, dict]:
    """Mixer kind -> config used in every row of that layer type: the catalog's mixers that
    declare a Table 1 config (a plugin's included, once registered), in catalog order."""
    return {name: dict(m.table1_config) for name, m in catalog.mixers().items()
            if m.table1_config is not None}

B = 2  # fixed batch for the fits, so time per sequence is comparable across n and d


def table1_points(suite: str, ns: tuple[int, ...], ds: tuple[int, ...], kr_n: int,
                  structure_ns: tuple[int, ...], path_ns: tuple[int, ...],
                  tokens: int) -> list[Point]:
    """The Table 1 grid at given sizes: `ns` at d = 32 (and the d fit at n = kr_n over `ds`),
    kernel/window sweeps at n = kr_n, structural points over `structure_ns` / `path_ns`,
    time at `tokens` tokens per batch over the n of `structure_ns` scaled up."""

    table = layers()

    def layer(fit: str, mixer: str, n: int, d: int, batch: int = B, **extra) -> Point:
        return Point(suite, "layer", mixer, n, d, batch, config=config(table[mixer] | extra),
                     fit=fit)

    pts = []
    for mixer in table:
        pts += [layer("n", mixer, n, 32) for n in ns]
        pts += [layer("d", mixer, kr_n, d) for d in ds]
    pts += [layer("kr", "convolutional", kr_n, 32, kernel_size=k) for k in (3, 7, 15)]
    pts += [layer("kr", "restricted-attention", kr_n, 32, window=r) for r in (16, 64, 128)]
    # explicit scores (math backend): the formulation whose memory the paper's n^2 describes;
    # the other layers' memory comes from their "n" points
    pts += [layer("memory", "self-attention", n, 32, attn_backend="math") for n in ns]
    # wall-clock evidence for sequential ops: B * n = tokens at every n
    pts += [layer("fixed-tokens", m, n, 64, batch=tokens // n)
            for m in ("self-attention", "lstm") for n in (2 * s for s in structure_ns)]
    cell = {"lstm": {"rnn_impl": "cell"}}
    for mixer in table:
        cfg = table[mixer] | cell.get(mixer, {})
        pts += [Point(suite, "seq-ops", mixer, n, 16, 1, config=config(cfg), fit="seq-ops")
                for n in structure_ns]
        stacks = [(cfg, PathOptions())]
        if mixer == "convolutional":  # causal, as WaveNet: a centred dilated stack would
            # need positions outside the sequence to link its two ends
            stacks = [(cfg | {"padding": "causal"}, PathOptions(dilation_growth=grow))
                      for grow in (False, True)]
        if mixer == "restricted-attention":
            stacks = [(cfg | {"window": 4}, PathOptions())]  # small r: several layers
        pts += [Point(suite, "path", mixer, n, 8, 1, config=config(c), options=o, fit="path")
                for c, o in stacks for n in path_ns]
    return pts


def table1() -> list[Point]:
    """Table 1: complexity (FLOPs, time), sequential ops, path length and memory of
    self-attention, LSTM, convolution and restricted attention, and of minGRU through its
    level-by-level parallel scan (later work; about 3 minutes on 2 cores)."""
    return table1_points("table1", ns=(256, 512, 1024, 2048), ds=(16, 32, 64, 128), kr_n=512,
                         structure_ns=(16, 32, 64, 128, 256), path_ns=(8, 16, 32, 64),
                         tokens=2048)
