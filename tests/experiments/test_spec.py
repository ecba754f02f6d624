"""A point's names: its config_key (the whole configuration), its short point id, the digest
that names its files, and its configuration as JSON, rebuilt whole."""

from __future__ import annotations

import hashlib
import json

import pytest

import experiments
from experiments.spec import (
    Match,
    Point,
    TaskSpec,
    TrainOptions,
    TranslateOptions,
    config,
    short_id,
)

TRANSLATE = Point("t2", "translate", "lstm-attention", 0, 128, 64, seed=2, study="table2",
                  config=config({"n_layers": 2, "dropout": 0.1}),
                  options=TranslateOptions(steps=600, alphas=(0.0, 0.2, 1.4), warmup_steps=261,
                                           bitext=("/data/a-b.tsv",), recipe_keeps=("dropout",),
                                           match=Match("transformer", config(
                                               {"n_heads": 4, "d_ff": 384}))))
TRAIN = Point("c", "train", "lstm-lm", 64, 32, 8, compile=True, fit="n",
              options=TrainOptions(TaskSpec("mqar", 64, keywords=(("n_queries", 4), ("k", 2))),
                                   steps=300, lr=1e-3, match=Match("gpt", config({"h": 2}))))


def _declared() -> list[Point]:
    """Every point this checkout declares: each suite's, each search's base points."""
    points = [p for name in experiments.suite_names() for p in experiments.points(name)]
    return points + [p for make in experiments.SEARCHES.values() for p in make().base]


def test_point_id_is_short_and_ends_in_the_digest_of_its_config_key() -> None:
    key = TRANSLATE.config_key
    assert key.startswith("table2-translate-lstm-attention-alphas=0.0;0.2;1.4-")
    assert TRANSLATE.digest == hashlib.sha256(key.encode()).hexdigest()[:12]
    assert TRANSLATE.point_id == f"table2-translate-lstm-attention-s2-{TRANSLATE.digest}"
    assert TRAIN.point_id == f"n-train-lstm-lm-s0-compiled-{TRAIN.digest}"
    assert Point("s", "layer", "lstm", 16, 32, 4).point_id.startswith("layer-lstm-s0-")


def test_short_id_of_every_declared_points_config_key_is_its_point_id() -> None:
    """What `tvr migrate-ids` computes from an older run's id (its config_key) alone is the
    id today's code gives the same point, and a short id is left as it is."""
    points = _declared()
    assert len(points) > 1000
    for p in points:
        assert short_id(p.config_key) == p.point_id, p.config_key
        assert short_id(p.point_id) is None
    assert len({p.point_id for p in points}) == len({p.config_key for p in points})


@pytest.mark.parametrize("point", [TRANSLATE, TRAIN], ids=["translate", "train"])
def test_a_points_configuration_rebuilds_it(point: Point) -> None:
    data = json.loads(json.dumps(point.to_config()))
    assert data["point_id"] == point.point_id and data["config_key"] == point.config_key
    assert data["options"]["match"] == {"type": "Match", "model": point.options.match.model,
                                        "config": dict(point.options.match.config)}
    back = Point.from_config(data | {"machine": "m"})
    assert back == point and back.config_key == point.config_key
    assert isinstance(back.options.match, Match)


def test_translation_options_keep_their_tuples() -> None:
    back = Point.from_config(json.loads(json.dumps(TRANSLATE.to_config())))
    assert back.options.alphas == (0.0, 0.2, 1.4)
    assert back.options.bitext == ("/data/a-b.tsv",)
    assert back.config == TRANSLATE.config


def test_every_declared_point_rebuilds_from_its_configuration() -> None:
    for p in _declared():
        assert Point.from_config(json.loads(json.dumps(p.to_config()))) == p, p.point_id


def test_a_configuration_of_unknown_options_is_refused() -> None:
    data = TRAIN.to_config()
    data["options"]["type"] = "Nope"
    with pytest.raises(ValueError, match="not a point's options: 'Nope'"):
        Point.from_config(data)
