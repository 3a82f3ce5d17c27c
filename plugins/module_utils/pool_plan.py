# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pool planner: spread a pool's target concurrency (slots) over hosts by weight.

A pure function with no Ansible imports, so the filter, the playbooks and the unit tests share it.

How a plan is made (``plan_pool``):

1. Each host's exact share of the target is ``target * weight / total weight``, clamped to the
   host's bounds; the clamped shares are rescaled so they still add up to the target (exact
   rational arithmetic, so the result never depends on float rounding or host order).
2. Every host gets the whole part of its share. The few slots left over (fewer than the number
   of hosts) go one each to hosts with a fractional share, highest Sainte-Lague priority
   ``weight / (slots + 1/2)`` first, ties to the alphabetically first name.

So each host ends up within one slot of its exact share (and within one instance of
``share / slots_per_instance``). Among such plans, the Sainte-Lague order is the one in which
adding or removing a host almost never makes another host gain or lose in the wrong direction:
with equal weights never (the property tests prove it), with unequal weights only in rare
corner cases, by one slot (the known price of keeping every host within one slot of its share).

``min`` and ``max`` count instances. A host with ``min: m`` gets at least
``m * slots_per_instance`` slots (its m instances full), a host with ``max: M`` at most
``M * slots_per_instance``. ``target: 0`` drains everything and ignores ``min``.
Each host runs ``ceil(slots / slots_per_instance)`` instances; its last one may carry fewer slots.
"""

from __future__ import absolute_import, division, print_function

import math
import re
from collections.abc import Mapping
from fractions import Fraction

__metaclass__ = type

DEFAULT_SLOTS_PER_INSTANCE = 1
# Pulumi caps an organisation at 150 concurrent workflows.
DEFAULT_CAP = 150
HOST_KEYS = ("name", "weight", "min", "max")

_WHOLE = re.compile(r"^\s*[+]?[0-9]+\s*$")


class PoolPlanError(ValueError):
    """The plan cannot be made; str() names the numbers involved."""


def _whole(what, value, low):
    """A whole number >= low, from an int or a string of digits (extra vars arrive as strings)."""
    if isinstance(value, bool):
        raise PoolPlanError("%s must be a whole number, got a boolean" % what)
    if isinstance(value, int):
        number = value
    elif (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and _WHOLE.match(value)
    ):
        number = int(value)
    else:
        raise PoolPlanError("%s must be a whole number, got %r" % (what, value))
    if number < low:
        raise PoolPlanError("%s must be at least %d, got %d" % (what, low, number))
    return number


def _weight(name, value):
    if isinstance(value, bool):
        raise PoolPlanError("host %r: weight must be a positive number, got a boolean" % name)
    try:
        if isinstance(value, (int, float)):
            weight = Fraction(value)
        elif isinstance(value, str):
            weight = Fraction(value.strip())
        else:
            raise TypeError(value)
    except (TypeError, ValueError, OverflowError):
        # Fraction() rejects nan, inf and non-numeric strings alike.
        raise PoolPlanError(
            "host %r: weight must be a positive number, got %r" % (name, value)
        ) from None
    if weight <= 0:
        raise PoolPlanError("host %r: weight must be a positive number, got %r" % (name, value))
    return weight


def _hosts(hosts):
    """Normalize the hosts list into (name, weight, min, max) tuples, sorted by name."""
    if hosts is None:
        hosts = []
    # Any iterable but a string or a mapping: Jinja hands filters generators (map, select).
    if isinstance(hosts, (str, bytes, Mapping)) or not hasattr(hosts, "__iter__"):
        raise PoolPlanError(
            "hosts must be a list of host names or of dicts with name, weight, min, max; got %s"
            % type(hosts).__name__
        )
    out = {}
    for index, item in enumerate(hosts):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, Mapping):
            raise PoolPlanError(
                "hosts[%d] must be a host name or a dict with name, weight, min, max; got %s"
                % (index, type(item).__name__)
            )
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise PoolPlanError("hosts[%d] needs a non-empty name, got %r" % (index, name))
        unknown = sorted(str(k) for k in item if k not in HOST_KEYS)
        if unknown:
            raise PoolPlanError(
                "host %r: unknown key %s (valid: %s)" % (name, unknown[0], ", ".join(HOST_KEYS))
            )
        name = str(name)  # plain str, whatever string subclass the template engine passed
        if name in out:
            raise PoolPlanError("host %r is listed twice" % name)
        weight = _weight(name, item.get("weight", 1))
        low = item.get("min")
        low = 0 if low is None else _whole("host %r: min" % name, low, 0)
        high = item.get("max")
        high = None if high is None else _whole("host %r: max" % name, high, 0)
        if high is not None and high < low:
            raise PoolPlanError("host %r: max %d is below its min %d" % (name, high, low))
        out[name] = (name, weight, low, high)
    return [out[name] for name in sorted(out)]


def _plural(number, word):
    return "%d %s%s" % (number, word, "" if number == 1 else "s")


def _shares(target, bounded):
    """Exact shares: clamp(lam * weight, low, high), with lam chosen so they add up to target.

    ``bounded`` is a list of (weight, low, high) in slots. sum(clamp(lam * weight)) is piecewise
    linear and non-decreasing in lam, with kinks where a host reaches one of its bounds: find
    the piece that reaches the target and solve it.
    """

    def total(lam):
        return sum(_clamp(lam * w, lo, hi) for w, lo, hi in bounded)

    kinks = set([Fraction(0)])
    for w, lo, hi in bounded:
        kinks.add(lo / w)
        if hi is not None:
            kinks.add(hi / w)
    kinks = sorted(kinks)
    prev, prev_total = kinks[0], total(kinks[0])
    if prev_total >= target:  # the mins alone make the target
        lam = prev
    else:
        for kink in kinks[1:]:
            kink_total = total(kink)
            if kink_total >= target:
                lam = prev + (target - prev_total) * (kink - prev) / (kink_total - prev_total)
                break
            prev, prev_total = kink, kink_total
        else:
            # Past the last kink only hosts without a max still grow (the caller checked).
            slope = sum(w for w, _lo, hi in bounded if hi is None)
            lam = prev + (target - prev_total) / slope
    return [_clamp(lam * w, lo, hi) for w, lo, hi in bounded]


def _clamp(value, low, high):
    value = max(value, low)
    return value if high is None else min(value, high)


def plan_pool(hosts, target, slots_per_instance=DEFAULT_SLOTS_PER_INSTANCE, cap=DEFAULT_CAP):
    """Plan ``target`` slots over ``hosts``.

    Returns ``{name: {"instances": int, "slots": int}}`` whose slots add up to ``target``.
    Raises PoolPlanError with the numbers when that is impossible.
    """
    target = _whole("target", target, 0)
    per = _whole("slots_per_instance", slots_per_instance, 1)
    cap = _whole("cap", cap, 0)
    specs = _hosts(hosts)
    if target > cap:
        raise PoolPlanError("target %d is above the cap of %d concurrent workflows" % (target, cap))
    if target == 0:
        return dict((name, {"instances": 0, "slots": 0}) for name, _w, _lo, _hi in specs)
    if not specs:
        raise PoolPlanError("target %d needs at least one host, got none" % target)

    per_text = _plural(per, "slot") + " per instance"
    # Bounds in slots: min instances full, max instances full.
    bounded = [(w, lo * per, None if hi is None else hi * per) for _n, w, lo, hi in specs]
    need = sum(lo for _w, lo, _hi in bounded)
    if need > target:
        raise PoolPlanError(
            "target %d is below the hosts' total min of %s (%s x %s)"
            % (target, _plural(need, "slot"), _plural(need // per, "instance"), per_text)
        )
    if all(hi is not None for _w, _lo, hi in bounded):
        room = sum(hi for _w, _lo, hi in bounded)
        if room < target:
            raise PoolPlanError(
                "target %d is above the hosts' total max of %s (%s x %s)"
                % (target, _plural(room, "slot"), _plural(room // per, "instance"), per_text)
            )

    shares = _shares(target, bounded)
    slots = [int(math.floor(share)) for share in shares]
    # Only hosts with a fractional share may take one more slot: that keeps everyone within
    # one slot of its share. Among them, Sainte-Lague priority first, then name.
    extra = sorted(
        (i for i, share in enumerate(shares) if share != slots[i]),
        key=lambda i: (-specs[i][1] / (slots[i] + Fraction(1, 2)), specs[i][0]),
    )
    for i in extra[: target - sum(slots)]:
        slots[i] += 1
    plan = {}
    for i, spec in enumerate(specs):
        plan[spec[0]] = {"instances": -(-slots[i] // per), "slots": slots[i]}
    return plan
