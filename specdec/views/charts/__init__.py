"""Pure chart builders: records in, figures out (Plotly, and Altair for the clickable timeline).
No Streamlit here. One module per page, in the order a class meets them, and the shared look:

    style.py          colours, the house layout, token labels made safe to show
    rounds.py         the round-by-round view: q's choices, p beside q, the accept test, the timeline
    speedup.py        the race, the speed-up so far, acceptance per round, theory against measurement
    variants.py       drafters side by side; the early exit's branch off the target's layers
    code_vs_prose.py  one box per category of prompts
    idle_machine.py   what a target pass costs, where a round's time goes
    guarantee.py      the rule on toy distributions, sampled outcomes side by side
    rule_trial.py     acceptance against distance, the exact rule over temperature
    trees.py          a token tree by verdict, its attention mask, the sibling test, tree rules' acceptance
    batch_class.py    throughput, a pass's cost and the ratio as rows are added
    student.py        a student's guesses against the true chances
    class_poll.py     the room's answers to a question, beside the measured truth on reveal

Pages call them as `charts.<name>`; every builder is re-exported here.
"""

from specdec.views.charts.batch_class import batch_cost_chart, batch_ratio_chart, batch_throughput_chart
from specdec.views.charts.class_poll import class_answers_chart
from specdec.views.charts.code_vs_prose import category_chart
from specdec.views.charts.guarantee import empirical_chart, toy_chart
from specdec.views.charts.idle_machine import forward_cost_chart, round_breakdown_chart
from specdec.views.charts.rounds import (
    GREEDY_ZONE,
    TIMELINE_COLORS,
    TIMELINE_PICK,
    ZONES,
    VegaLiteFigure,
    acceptance_chart,
    distribution_chart,
    draft_chart,
    feature_chart,
    threshold_chart,
    timeline_chart,
    timeline_rows,
)
from specdec.views.charts.rule_trial import (
    RULE_COLORS,
    band_headline,
    exact_law_chart,
    rule_trial_chart,
    temperature_sweep_chart,
)
from specdec.views.charts.speedup import (
    acceptance_rounds_chart,
    accepted_length_chart,
    cumulative_speedup_chart,
    gamma_sweep_chart,
    race_chart,
    speedup_curve_chart,
)
from specdec.views.charts.student import calibration_chart
from specdec.views.charts.style import (
    ACCEPT_COLOR,
    BONUS_COLOR,
    HIGHLIGHT_LINE,
    LANE_COLORS,
    MAX_BARS,
    MUTED_COLOR,
    P_COLOR,
    PLAIN_COLOR,
    Q_COLOR,
    REJECT_COLOR,
    RESIDUAL_COLOR,
    SPEC_COLOR,
    THEORY_COLOR,
)
from specdec.views.charts.trees import mask_chart, step_chart, tree_acceptance_chart, tree_chart
from specdec.views.charts.variants import drafter_chart, early_exit_chart

__all__ = [
    "P_COLOR",
    "Q_COLOR",
    "RESIDUAL_COLOR",
    "ACCEPT_COLOR",
    "REJECT_COLOR",
    "BONUS_COLOR",
    "MUTED_COLOR",
    "HIGHLIGHT_LINE",
    "MAX_BARS",
    "SPEC_COLOR",
    "PLAIN_COLOR",
    "THEORY_COLOR",
    "LANE_COLORS",
    "draft_chart",
    "feature_chart",
    "distribution_chart",
    "ZONES",
    "GREEDY_ZONE",
    "acceptance_chart",
    "threshold_chart",
    "TIMELINE_COLORS",
    "TIMELINE_PICK",
    "timeline_rows",
    "VegaLiteFigure",
    "timeline_chart",
    "race_chart",
    "cumulative_speedup_chart",
    "acceptance_rounds_chart",
    "accepted_length_chart",
    "speedup_curve_chart",
    "gamma_sweep_chart",
    "drafter_chart",
    "early_exit_chart",
    "category_chart",
    "forward_cost_chart",
    "round_breakdown_chart",
    "toy_chart",
    "empirical_chart",
    "RULE_COLORS",
    "band_headline",
    "rule_trial_chart",
    "exact_law_chart",
    "temperature_sweep_chart",
    "batch_throughput_chart",
    "batch_cost_chart",
    "batch_ratio_chart",
    "calibration_chart",
    "class_answers_chart",
    "tree_chart",
    "mask_chart",
    "step_chart",
    "tree_acceptance_chart",
]
