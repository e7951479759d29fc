"""measure.batching's arithmetic and the page's charts, on hand-made numbers (no model)."""

import pytest

from specdec.measure import batching
from specdec.measure.batching import BatchPoint
from specdec.views import charts


def point(batch_size, target_tps, spec_tps, **extra):
    values = dict(batch_size=batch_size, rows=batch_size, target_only_tokens=int(target_tps * 10),
                  target_only_seconds=10.0, speculative_tokens=int(spec_tps * 10), speculative_seconds=10.0,
                  target_pass_seconds=0.03 * batch_size ** 0.5, verify_pass_seconds=0.05,
                  verify_pass_tokens=3.0 * batch_size, draft_seconds_per_round=0.01, tokens_per_pass=2.0,
                  alpha=0.6) | extra
    return BatchPoint(**values)


def test_bench_fields_are_the_five_named_and_consistent():
    p = point(4, 50.0, 40.0)
    fields = p.bench_fields()
    assert set(fields) == {"target_only_tokens_per_second", "speculative_tokens_per_second", "ratio",
                           "per_row_tokens_per_second", "pass_seconds_per_row"}
    assert fields["ratio"] == pytest.approx(0.8)
    assert fields["per_row_tokens_per_second"] == pytest.approx(10.0)  # 40 tokens/s over 4 rows
    assert fields["pass_seconds_per_row"] == pytest.approx(p.target_pass_seconds / 4)


def test_crossover_is_the_first_batch_size_below_one():
    points = [point(1, 20, 30), point(2, 35, 40), point(4, 60, 55), point(8, 90, 95)]
    assert batching.crossover(points) == 4
    assert batching.crossover(points[:2]) is None


def test_fill_rows_repeats_prompts_to_whole_batches():
    prompts = [[1], [2], [3]]
    assert batching.fill_rows(prompts, 2) == [[1], [2], [3], [1]]
    assert batching.fill_rows(prompts, 8) == [[1], [2], [3], [1], [2], [3], [1], [2]]
    assert batching.fill_rows(prompts, 1) == prompts


def curve_of(seconds, sizes=(4, 8)):
    return [{"rows": b, "tokens_per_row": n, "tokens": b * n, "seconds": seconds(b, n)}
            for b in sizes for n in (1, 5)]


def test_expected_ratio_from_acceptance_and_the_cost_curve():
    """Flat passes (memory-bound): the ratio is tokens per round over (1 + drafting); a pass that costs
    in proportion to its tokens (compute-bound) leaves tokens per round / (k̄ + 1) at best."""
    p = point(4, 1, 1, verify_pass_tokens=12.0, draft_seconds_per_round=0.0, tokens_per_pass=2.5)
    assert batching.expected_ratio(p, curve_of(lambda b, n: 0.1)) == pytest.approx(2.5)
    steep = curve_of(lambda b, n: 0.1 * n)
    assert batching.expected_ratio(p, steep) == pytest.approx(2.5 / 3)  # 12 tokens = 3 per row
    # Rows that finished early: the rounds served 2 rows on average, for a pass that costs as much.
    fewer = point(4, 1, 1, verify_pass_tokens=6.0, draft_seconds_per_round=0.0, tokens_per_pass=2.5,
                  verify_pass_rows=2.0, target_pass_rows=4.0)
    assert batching.expected_ratio(fewer, curve_of(lambda b, n: 0.1)) == pytest.approx(2.5 / 2)


def test_cost_at_is_linear_in_tokens_then_rows_and_clamped():
    curve = curve_of(lambda b, n: b * 1.0 + n * 10.0)
    assert batching.cost_at(curve, 4, 3) == pytest.approx(34.0)
    assert batching.cost_at(curve, 6, 1) == pytest.approx(16.0)
    assert batching.cost_at(curve, 2, 9) == pytest.approx(54.0)  # clamped to B = 4, 5 tokens per row
    assert batching.linear([(1, 1.0), (5, 3.0)], 3) == pytest.approx(2.0)


def test_charts_take_data_and_return_figures():
    rows = batching.class_rows([point(1, 20, 30), point(2, 35, 30)], [])
    throughput = charts.batch_throughput_chart(rows, crossover=2)
    assert [t.name for t in throughput.data] == ["speculative", "target only"]
    assert "B = 2" in throughput.layout.title.text and throughput.layout.shapes  # the crossover line
    never = charts.batch_throughput_chart(rows, crossover=None)
    assert not never.layout.shapes and "every B" in never.layout.title.text
    curve = [{"rows": b, "tokens_per_row": n, "tokens": b * n, "seconds": 0.01 * b * n ** 0.5}
             for b in (1, 2) for n in (1, 5)]
    cost = charts.batch_cost_chart(curve)
    assert {t.name for t in cost.data} >= {"1 per row (plain step)", "5 per row", "if flat", "if ∝ tokens"}
    for r in rows:
        r["expected_ratio"] = 1.1
    ratio = charts.batch_ratio_chart(rows)
    assert [t.name for t in ratio.data] == ["measured", "expected from α and the cost curve"]
    assert list(ratio.data[0].y) == [pytest.approx(1.5), pytest.approx(30 / 35)]
