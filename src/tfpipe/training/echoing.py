"""Data echoing in the fit report: the factor an input-bound run suggests, and its advice line.

Data echoing (Choi et al. 2019, "Faster Neural Network Training with Data Echoing") repeats each
decoded example k times when the input is what limits training, so that the model takes k
examples for the cost of reading and decoding one. It helps until k times the input's rate
reaches the model's; repeated examples are worth less than fresh ones, so the factor suggested
is the smallest that closes the gap, and never more than `MAX_ECHO`.
"""

from __future__ import annotations

import math

from tfpipe.checks import check_int, check_positive

MAX_ECHO = 4
"""The largest echo factor the report suggests: beyond it, repeats cost more in what the model
learns per step than the steps gain (Choi et al. found diminishing returns past a few)."""
_GUIDE = "docs/guides/mixing-and-echoing.md"


def echo_factor_for(input_steps_per_s: float, model_steps_per_s: float) -> int | None:
    """The echo factor that lets the input keep up with the model: the smallest integer k with
    k x `input_steps_per_s` >= `model_steps_per_s`, at most `MAX_ECHO` (4).

    The rates may be steps/s or examples/s, as long as both are the same. A gap larger than 4x
    still gives 4: echo at most that and make the input cheaper too.

    Examples:
        >>> from tfpipe.training.echoing import echo_factor_for
        >>> echo_factor_for(12.0, 31.2)  # 3 x 12 >= 31.2
        3
        >>> echo_factor_for(5.0, 31.2)  # a 6.2x gap: 4 at most
        4
        >>> echo_factor_for(40.0, 31.2) is None  # the input keeps up: nothing to echo
        True

    Args:
        input_steps_per_s: what the input delivers (fresh, not echoed), a finite number > 0.
        model_steps_per_s: what the model consumes alone, a finite number > 0.

    Returns:
        The factor, from 2 to 4; None when the input keeps up already (a factor of 1).
    """
    gap = check_positive("model_steps_per_s", model_steps_per_s) / check_positive(
        "input_steps_per_s", input_steps_per_s
    )
    factor = math.ceil(gap - 1e-9)  # 1e-9: 3 x (31.2 / 3) is 31.2 despite rounding
    return None if factor <= 1 else min(factor, MAX_ECHO)


def echo_advice(
    *,
    input_kind: str,
    batch_size: int,
    delivered: float,
    model: float,
    achieved: float,
    echo_factor: int = 1,
) -> list[str]:
    """The report's line on data echoing for an input-bound run (empty when echoing cannot
    help): the factor, the steps/s it should reach against the `achieved` ones, how this kind
    of input asks for it, and what it costs.

    `delivered` is the examples/s the input delivered during fit (the slower of the input alone
    and what fit achieved: the steps waited for it), `model` the model's alone; an input echoed
    `echo_factor` times already is judged on its fresh examples, and never advised beyond
    `MAX_ECHO` in all.
    """
    echo_factor = check_int("echo_factor", echo_factor)
    if delivered <= 0:  # no factor of nothing reaches the model
        return []
    fresh = delivered / echo_factor
    factor = echo_factor_for(fresh, model)
    if echo_factor >= MAX_ECHO:
        return [
            f"the input is echoed {echo_factor}x already, the most worth it: more repeats "
            "teach the model less per step than they save, so make the input cheaper (above)"
        ]
    if factor is None or factor <= echo_factor:
        return []
    gap = model / fresh
    call = f".echo({factor})"
    how = {
        "Pipeline": f"call {call} on the Pipeline"
        if echo_factor == 1
        else f"raise the Pipeline's .echo({echo_factor}) to {call}",
        "TFRecords": f"train from tfpipe.Pipeline(path, ...){call} instead of the path",
        "source": f"train from tfpipe.Pipeline(source, ...){call} instead of the source",
        "tf.data": f"train from tfpipe.Pipeline(...){call}, or repeat each example {factor} "
        "times after the costly map and before shuffle and batch (dataset.flat_map(lambda x, "
        f"y: tf.data.Dataset.from_tensors((x, y)).repeat({factor})))",
    }.get(input_kind, f"a {input_kind} cannot echo: train from tfpipe.Pipeline(...){call}")
    return [
        f"data echoing: the input delivered {fresh:,.0f} fresh examples/s in fit, the model "
        f"takes {model:,.0f} alone"
        + (
            f"; the gap is {gap:.1f}x: echo at most {MAX_ECHO} and cut the input cost too"
            if gap > MAX_ECHO
            else ""
        )
        + f"; {how} (each decoded example used {factor} times: an epoch of {factor}x the fresh "
        f"examples), and expect about {min(model, factor * fresh) / batch_size:,.1f} steps/s "
        f"against the {achieved / batch_size:,.1f} measured. Repeated examples are worth less "
        f"than fresh ones: compare the validation loss with a run without echo ({_GUIDE})"
    ]
