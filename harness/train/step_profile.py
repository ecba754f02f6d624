"""One training step of the Transformer LM and of the translation Transformer, timed and
profiled: what a step costs, its MFU, and where its time goes (torch.profiler).

`python -m harness.train.step_profile [--threads N] [--reps R] [--profile]` builds the first
Transformer-LM point of convergence-quick's ffn-width and convergence studies and
translation-quick's Transformer (on a seeded random batch of its shape: the corpus and BPE
do not change a step's cost), runs its update (harness.train.trainer's, with each study's
loss), and times the steps interleaved in one process
(harness.measure.compare.interleaved: medians of per-turn torch.utils.benchmark medians,
beside the machine's peak matmul rate measured in the same process). `--table2` times the
four models of Table 2 on a CPU instead (translation-cpu-tune's base points: 4,000 subwords,
64 pairs of 40 a side): each model's training MFU, measured side by side.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch

import models
from experiments.convergence import convergence_quick
from experiments.spec import Point
from experiments.translation import translation_cpu_tune, translation_quick
from harness.measure.compare import interleaved, peak_rate, timer_ms
from harness.measure.kernel_choice import use_measured_kernels
from harness.measure.kernel_swap import use_kernels
from harness.train import loop
from harness.train.train_runner import build_model, step_flops_per_token, train_spec
from harness.train.trainer import Trainer
from harness.train.translation import train as mt
from harness.train.translation import translate_runner as runner
from harness.train.translation.data import PairBatch

Step = tuple[Callable[[], object], float]  # one update, and its counted FLOPs


def lm_step(point: Point, device: torch.device) -> Step:
    """One update of the point's language model on its first training batch."""
    spec = train_spec(point, str(device))
    model = build_model(point, spec, device).train()
    d_model, cfg = spec.model["d_model"], spec.train
    trainer = Trainer(model, lambda k: loop.lr_at(k, cfg, d_model), cfg.steps, seed=point.seed,
                      device=device, clip=cfg.clip, betas=cfg.betas, eps=cfg.eps)
    batch = spec.task.train_batch(1, spec.train.batch_size).to(device)
    flops = step_flops_per_token(model, spec.task, spec.train.batch_size, device)
    return (lambda: trainer.update(loop.masked_loss(batch.logits(model), batch)),
            flops * batch.n_input_tokens)


def mt_step(point: Point, device: torch.device, vocab: int = 2000, length: int = 24) -> Step:
    """One update of the point's translation model on a seeded random (B, length) batch
    whose last sixth is padding, with the runner's optimiser and label smoothing."""
    torch.manual_seed(point.seed)
    model = use_kernels(models.build(point.subject, **runner.model_config(point, vocab)))
    model = model.to(device).train()
    gen = torch.Generator().manual_seed(point.seed)
    src, tgt = (torch.randint(4, vocab, (point.batch_size, length), generator=gen)
                for _ in range(2))
    pad = torch.zeros_like(src, dtype=torch.bool)
    pad[:, length - length // 6:] = True
    batch = PairBatch(src, pad, tgt, tgt.roll(-1, 1), ~pad).to(device)
    opts = runner.options(point)
    plan = mt.Plan(steps=opts.steps, peak_lr=opts.peak_lr, warmup=runner.warmup_steps(opts),
                   smoothing=opts.label_smoothing, eval_every=opts.eval_every)
    trainer = mt.trainer(model, plan, device, point.seed)
    flops = mt._count(model, batch, plan.smoothing)
    return lambda: trainer.update(mt.loss_of(model, batch, plan.smoothing)), float(flops)


def quick_steps(device: torch.device) -> dict[str, Step]:
    """The steps this module times: two LM points of convergence-quick, translation-quick's
    Transformer."""
    cq = convergence_quick()
    lm = {study: next(p for p in cq if p.study == study and p.subject == "transformer-lm")
          for study in ("ffn-width", "convergence")}
    mt_point = next(p for p in translation_quick() if p.subject == "transformer")
    return {f"lm/{study}": lm_step(p, device) for study, p in lm.items()} | {
        "translation/transformer": mt_step(mt_point, device)}


def table2_steps(device: torch.device, length: int = 40) -> dict[str, Step]:
    """An update of each model of Table 2 on a CPU (translation-cpu-tune's base points, the
    tuned suite's sizes) on a seeded random batch of `length` subwords a side."""
    return {f"translation/{p.subject}": mt_step(p, device, 4000, length)
            for p in translation_cpu_tune().base}


def time_steps(steps: dict[str, Step], device: torch.device, reps: int,
               min_run_time: float = 0.2, peak_n: int = 1024) -> dict[str, dict[str, float]]:
    """Per step: median ms over `reps` interleaved turns, the fastest turn, and the MFU of
    the median against the peak matmul rate (of peak_n-square products) at the current
    thread count."""
    for fn, _ in steps.values():
        fn(), fn()  # warm-up: oneDNN primitives, allocator, optimizer state
    timed = interleaved({name: (lambda fn=fn: timer_ms(fn, min_run_time))
                         for name, (fn, _) in steps.items()}, reps)
    peak = peak_rate(device, torch.get_num_threads(), peak_n)
    return {name: {"step_ms": statistics.median(timed[name]), "best_ms": min(timed[name]),
                   "mfu": flops / (statistics.median(timed[name]) / 1e3) / peak,
                   "peak_gflops": peak / 1e9}
            for name, (_, flops) in steps.items()}


def profile_table(fn: Callable[[], object], calls: int = 5, rows: int = 20) -> str:
    """torch.profiler's ops by self CPU time over `calls` steps."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--table2", action="store_true",
                        help="the four models of Table 2 on a CPU instead")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    print("kernels:", use_measured_kernels(device, torch.float32))
    steps = table2_steps(device) if args.table2 else quick_steps(device)
    for name, row in time_steps(steps, device, args.reps).items():
        print(f"{name}: step {row['step_ms']:.2f} ms (best {row['best_ms']:.2f}), "
              f"MFU {row['mfu']:.3f} of {row['peak_gflops']:.1f} GFLOP/s")
    if args.profile:
        for name, (fn, _) in steps.items():
            print(f"### {name}\n{profile_table(fn)}")


if __name__ == "__main__":
    main()
