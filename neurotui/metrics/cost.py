"""Money: what the run has cost, samples per dollar, and what reaching a target will cost.

Price-performance = samples/s x 3600 / USD per hour = samples per dollar; the "all-in" view
divides all samples by the whole bill, compile and idle time included. Every figure that
cannot be known (no price, no rate) is None, never a made-up number.
"""

from __future__ import annotations

from dataclasses import dataclass

from neurotui.metrics.common import finite_or_none, positive


def cost_so_far(usd_per_hour: float | None, started_at: float | None, now: float | None,
                ended_at: float | None = None) -> float | None:
    """USD spent from start to `now` (or to `ended_at` once ended): the instance bills all of
    it, compile and idle time included."""
    price = positive(usd_per_hour)
    start = finite_or_none(started_at)
    stop = finite_or_none(now)
    end = finite_or_none(ended_at)
    if end is not None:
        stop = end if stop is None else min(stop, end)
    if price is None or start is None or stop is None:
        return None
    return max(0.0, stop - start) / 3600.0 * price


def samples_per_dollar(samples_per_s: float | None,
                       usd_per_hour: float | None) -> float | None:
    """Price-performance: samples/s x 3600 / USD per hour (320/s at $1.34375/h -> 857,302)."""
    rate, price = positive(samples_per_s), positive(usd_per_hour)
    if rate is None or price is None:
        return None
    return rate * 3600.0 / price


def all_in_samples_per_dollar(total: float | None, total_cost_usd: float | None) -> float | None:
    """Samples per dollar of the whole bill so far (compile, warm-up and idle time included)."""
    count, cost = positive(total), positive(total_cost_usd)
    return None if count is None or cost is None else count / cost


def cost_per_million_samples(samples_per_s: float | None,
                             usd_per_hour: float | None) -> float | None:
    """USD per 1,000,000 samples at this throughput and price."""
    per_dollar = samples_per_dollar(samples_per_s, usd_per_hour)
    return None if per_dollar is None else 1e6 / per_dollar


def relative_price_performance(samples_per_s_a: float | None, usd_per_hour_a: float | None,
                               samples_per_s_b: float | None,
                               usd_per_hour_b: float | None) -> float | None:
    """Samples per dollar of A divided by B's: > 1 means A is the better deal.

    Equals (speed A / speed B) x (price B / price A), so a faster instance is worse exactly
    when its price ratio exceeds its speed ratio.
    """
    a = samples_per_dollar(samples_per_s_a, usd_per_hour_a)
    b = samples_per_dollar(samples_per_s_b, usd_per_hour_b)
    return None if a is None or b is None else a / b


@dataclass(frozen=True)
class Projection:
    """Time and money still needed to reach a target, at the current pace and price."""

    remaining_s: float
    remaining_usd: float | None
    total_usd: float | None
    """Spent so far plus remaining, when both are known."""
    eta: float | None
    """Unix time of arrival, when `now` was given."""


def project_remaining(done: float | None, target: float | None, rate_per_s: float | None,
                      usd_per_hour: float | None = None, spent_usd: float | None = None,
                      now: float | None = None) -> Projection | None:
    """Projection for `target - done` units at `rate_per_s` units per second.

    None when the target, the progress or the rate is unknown (or zero); the money parts are
    None without a price. At or past the target the remaining time is 0.
    """
    goal, so_far, rate = positive(target), finite_or_none(done), positive(rate_per_s)
    if goal is None or so_far is None or rate is None:
        return None
    remaining_s = max(0.0, goal - so_far) / rate
    price = positive(usd_per_hour)
    remaining_usd = None if price is None else remaining_s / 3600.0 * price
    spent = finite_or_none(spent_usd)
    total = None if remaining_usd is None or spent is None else spent + remaining_usd
    moment = finite_or_none(now)
    eta = None if moment is None else moment + remaining_s
    return Projection(remaining_s, remaining_usd, total, eta)


def project_to_step(current_step: float | None, target_step: float | None,
                    step_time_s: float | None, usd_per_hour: float | None = None,
                    spent_usd: float | None = None,
                    now: float | None = None) -> Projection | None:
    """Time and cost to reach config.step_target at the steady step time."""
    step_time = positive(step_time_s)
    rate = None if step_time is None else 1.0 / step_time
    return project_remaining(current_step, target_step, rate, usd_per_hour, spent_usd, now)


def per_epoch(dataset_size: float | None, samples_per_s: float | None,
              usd_per_hour: float | None = None) -> Projection | None:
    """Time and money for one pass over `dataset_size` samples at this throughput and price
    (1,281,167 ImageNet images at 320/s on $1.34375/h: 4,004 s, $1.49). None without a size
    or a rate; no money without a price."""
    return project_remaining(0.0, dataset_size, samples_per_s, usd_per_hour)
