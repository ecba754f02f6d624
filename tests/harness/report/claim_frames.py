"""Made-up results folders for the claims-ledger tests: rows written as results.csv files,
with the measured values chosen by each test to yield a given verdict."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

DEFAULTS = {"status": "ok", "device": "cpu", "device_name": "test CPU", "machine": "m",
            "threads": 1, "dtype": "float32", "batch_size": 1, "seed": 0}


def write_suite(out: Path, suite: str, rows: list[dict]) -> None:
    """rows as <out>/<suite>/results.csv, each completed with DEFAULTS and a point_id."""
    frame = pd.DataFrame([DEFAULTS | {"suite": suite, "point_id": f"p{i}"} | row
                          for i, row in enumerate(rows)])
    (out / suite).mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / suite / "results.csv", index=False)


# ---------------------------------------------------------------- table1 and quick

NS = (256, 512, 1024, 2048)
DS = (16, 32, 64, 128)


def seq_ops_rows(attn=lambda n: 8, lstm=lambda n: 8 * n) -> list[dict]:
    return [{"runner": "seq-ops", "fit": "seq-ops", "mixer": m, "seq_len": n, "d_model": 16,
             "seq_ops": f(n)} for m, f in (("self-attention", attn), ("lstm", lstm))
            for n in (16, 32, 64, 128, 256)]


def path_rows(attn=lambda n: 1, lstm=lambda n: n - 1) -> list[dict]:
    return [{"runner": "path", "fit": "path", "mixer": m, "seq_len": n, "d_model": 8,
             "path_length": f(n)} for m, f in (("self-attention", attn), ("lstm", lstm))
            for n in (8, 16, 32, 64)]


def layer_row(fit: str, mixer: str, n: int, d: int, flops: float, ms: float,
              saved: float, **extra) -> dict:
    return {"runner": "layer", "fit": fit, "mixer": mixer, "seq_len": n, "d_model": d,
            "flops_fwd": flops, "flops_fwd_attn": flops, "fwd_ms": ms, "fwdbwd_ms": 3 * ms,
            "saved_bytes": saved, "kernel": "test-kernel", **extra}


def cost_rows(attn_flops=lambda n, d: n * n * d, lstm_flops=lambda n, d: n * d * d,
              time_scale=lambda m, f: f * 1e-6, memory=lambda n: n * n,
              fused_memory=lambda n: n * n) -> list[dict]:
    """Table 1's fit=n (d = 32), fit=d (n = 512) and fit=memory rows of attention and LSTM:
    FLOPs from the given functions, time from time_scale(mixer, flops)."""
    rows = []
    for mixer, f in (("self-attention", attn_flops), ("lstm", lstm_flops)):
        for fit, sizes in (("n", [(n, 32) for n in NS]), ("d", [(512, d) for d in DS])):
            for n, d in sizes:
                saved = fused_memory(n) if mixer == "self-attention" else n
                rows.append(layer_row(fit, mixer, n, d, f(n, d), time_scale(mixer, f(n, d)),
                                      saved))
    rows += [layer_row("memory", "self-attention", n, 32, attn_flops(n, 32), 1.0, memory(n))
             for n in NS]
    rows += [layer_row("fixed-tokens", m, n, 64, 1.0, 1.0, 1.0, batch_size=2048 // n)
             for m in ("self-attention", "lstm") for n in (32, 64, 128, 256, 512)]
    return rows


def table1_rows(**overrides) -> list[dict]:
    parts = {"seq_ops": {}, "path": {}, "cost": {}} | overrides
    return [*seq_ops_rows(**parts["seq_ops"]), *path_rows(**parts["path"]),
            *cost_rows(**parts["cost"])]


CLOSED_FORM = {  # forward matmul FLOPs per sequence (harness.report.tables)
    "self-attention": lambda n, d: 8 * n * d * d + 4 * n * n * d,
    "attention-core": lambda n, d: 4 * n * n * d,
    "lstm": lambda n, d: 16 * n * d * d,
    "gru": lambda n, d: 12 * n * d * d,
}


def quick_rows(flops=CLOSED_FORM, speed=None) -> list[dict]:
    """A plain layer sweep; time = FLOPs / speed[mixer] (default: one speed for all)."""
    speed = speed or {}
    return [{"runner": "layer", "mixer": m, "seq_len": n, "d_model": d, "batch_size": 2,
             "flops_fwd": 2 * f(n, d), "fwd_ms": 2 * f(n, d) / speed.get(m, 1e9),
             "fwdbwd_ms": 6 * f(n, d) / speed.get(m, 1e9)}
            for m, f in flops.items() for n in (32, 64, 128, 256, 512, 1024)
            for d in (64, 128, 256)]


def gpu_rows(attn_rate: float, lstm_rate: float) -> list[dict]:
    """cuda layer rows whose achieved FLOP rates are the given GFLOP/s."""
    return [{"runner": "layer", "mixer": m, "seq_len": n, "d_model": 1024, "device": "cuda",
             "flops_fwd": 1e12, "fwd_ms": 1e12 / rate / 1e6}
            for m, rate in (("self-attention", attn_rate), ("lstm", lstm_rate))
            for n in (1024, 8192)]


def fixed_token_rows(lstm_k: float, ratio: float, tokens: int = 32768) -> list[dict]:
    """cuda fixed-tokens rows, two dtypes: the LSTM's time per token ~ n^lstm_k, attention's
    flat, and the LSTM `ratio` times attention's at the longest n (8192)."""
    ns = (512, 1024, 2048, 4096, 8192)
    per_token = {"lstm": lambda n: ratio * (n / 8192) ** lstm_k, "self-attention": lambda n: 1.0}
    return [{"runner": "layer", "fit": "fixed-tokens", "mixer": m, "seq_len": n, "d_model": 1024,
             "batch_size": tokens // n, "device": "cuda", "dtype": dtype,
             "fwdbwd_ms": per_token[m](n) * tokens / 1e3}
            for dtype in ("bfloat16", "float32") for m in per_token for n in ns]


# ---------------------------------------------------------------- convergence-quick

SEEDS = range(5)  # five seeds: an exact permutation test of 5 + 5 can reach p = 0.008


def five(value: float | None, step: float = 0.001) -> tuple:
    """Five seeds' values around `value` (None: five censored runs)."""
    return (None,) * 5 if value is None else tuple(value + step * i for i in range(5))


def train_row(study: str, seed: int, runner: str = "train", **values) -> dict:
    return {"runner": runner, "study": study, "model": "transformer-lm", "seq_len": 8,
            "d_model": 64, "seed": seed, "n_params": 1000, "steps": 600, "alphabet_size": 16,
            **values}


def gradient_rows(rnn_decay: float, attn_decay: float, rnn_acc: float) -> list[dict]:
    rows = [train_row("gradient-distance", s, "grad-distance", model=m, seq_len=64,
                      grad_decay_init=rnn_decay if m != "transformer-lm" else attn_decay)
            for m in ("transformer-lm", "lstm-lm", "gru-lm") for s in SEEDS]
    rows += [train_row("convergence", s, model=m, task="distance-k", k=k, seq_len=16,
                       final_accuracy=rnn_acc if m != "transformer-lm" and k > 1 else 0.99)
             for m in ("transformer-lm", "lstm-lm", "gru-lm") for s in SEEDS for k in (1, 12)]
    return rows


def attn_init_rows(var_ratio: float = 1.0, jac_off: float = 0.1, jac_off_unit: float = 0.1,
                   entropy_off: float = 0.5, own_slope: float = 1.0) -> list[dict]:
    """Init-time q.k statistics; the scaled rows have Jacobian 0.25, entropy 3; the model's
    own Var(q.k) grows as d_k^own_slope."""
    return [train_row("scaling-factor", s, "attn-init", d_k=d, d_model=d, attn_scale=scale,
                      qk_var_unit=var_ratio * d, attn_entropy_max=3.2,
                      qk_var=d ** own_slope * (1 + 0.01 * s),
                      attn_entropy=3.0 if scale else entropy_off,
                      attn_entropy_unit=3.0 if scale else entropy_off,
                      softmax_jacobian_norm=0.25 if scale else jac_off + 0.001 * s,
                      softmax_jacobian_norm_unit=0.25 if scale else jac_off_unit + 0.001 * s)
            for d in (16, 64, 256) for scale in (True, False) for s in (0, 1, 2)]


def scaling_train_rows(steps: dict[tuple[int, bool], tuple]) -> list[dict]:
    """{(d_k, scaled): steps to target per seed (None: never reached)}."""
    return [train_row("scaling-factor", s, d_model=d, attn_scale=scale, task="copy",
                      steps_to_target=v) for (d, scale), values in steps.items()
            for s, v in enumerate(values)]


def heads_rows(steps: dict[int, tuple], flops=lambda h: 2e5, speed=lambda h: 9e4,
               acc: dict[int, tuple] | None = None) -> list[dict]:
    """{h: steps to target per seed}; final accuracy per seed from `acc` (default: 0.995
    where the target was reached, else 0.9)."""
    acc = acc or {}
    return [train_row("heads", s, n_heads=h, task="reverse", steps_to_target=v,
                      flops_fwd_per_token=flops(h), tokens_per_s=speed(h),
                      final_accuracy=acc[h][s] if h in acc else 0.9 if v is None else 0.995)
            for h, values in steps.items() for s, v in enumerate(values)]


def ffn_rows(bits: dict[int, tuple], unigram: float | None = 4.3) -> list[dict]:
    """{d_ff / d_model: bits per char per seed}; the corpus's unigram bits/char."""
    return [train_row("ffn-width", s, task="corpus", d_ff=r * 64, final_bits_per_char=v,
                      unigram_bits_per_char=unigram)
            for r, values in bits.items() for s, v in enumerate(values)]


def positional_rows(acc: dict[str, tuple], acc_2n: dict[str, tuple],
                    tasks=("copy", "reverse"), alphabet: int = 16,
                    steps: dict[str, tuple] | None = None) -> list[dict]:
    """{encoding: accuracy per seed} at n and at 2n, the same on every task; steps to target
    per seed (default: 300 where the accuracy reached 99%)."""
    steps = steps or {}
    return [train_row("positional", s, task=t, pos_encoding=pe, alphabet_size=alphabet,
                      final_accuracy=acc[pe][s], accuracy_2n=acc_2n[pe][s],
                      steps_to_target=steps[pe][s] if pe in steps else
                      300 if acc[pe][s] >= 0.99 else None)
            for t in tasks for pe in acc for s in range(len(acc[pe]))]


def norm_rows(loss: dict[tuple[str, int, int], tuple], unigram: float | None = 4.3,
              ratio=lambda norm, depth: 1.5 if norm == "post" else 0.7,
              depths: tuple[int, ...] = (6, 12)) -> list[dict]:
    """{(norm, depth, warmup): final loss per seed}, plus init-time gradient rows at `depths`
    whose last/first layer ratio is ratio(norm, depth) (+0.01 per seed)."""
    rows = [train_row("norm-warmup", s, task="corpus", norm=norm, n_layers=depth,
                      warmup=w, final_loss=v, unigram_bits_per_char=unigram)
            for (norm, depth, w), values in loss.items() for s, v in enumerate(values)]
    rows += [train_row("norm-warmup", s, "layer-grads", norm=norm, n_layers=depth,
                       grad_norm_last_over_first=ratio(norm, depth) + 0.01 * s)
             for norm in ("post", "pre") for depth in depths for s in SEEDS]
    return rows


def thread_rows(speedup: dict[str, float]) -> list[dict]:
    """Thread-scaling rows: 1 and 2 threads at n = 64 and 1024, time / speedup[mixer] at 2."""
    rows = []
    for mixer, gain in speedup.items():
        for n in (64, 1024):
            depth = 8 if mixer == "self-attention" else 8 * n
            rows.append({"runner": "threads", "mixer": mixer, "seq_len": n, "d_model": 128,
                         "batch_size": 4096 // n, "threads_used": 1, "fwd_ms": 10.0,
                         "flops_fwd": 1e9, "span_ops": depth, "step_ms": 0.002,
                         "batch1_ms": 0.002 * depth})
            rows.append({"runner": "threads", "mixer": mixer, "seq_len": n, "d_model": 128,
                         "batch_size": 4096 // n, "threads_used": 2, "fwd_ms": 10.0 / gain,
                         "flops_fwd": 1e9})
    return rows
