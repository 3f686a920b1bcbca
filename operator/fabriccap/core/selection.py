"""Which ResourceSlice devices are a fabric's: its DeviceClasses' selectors, as the scheduler runs them.

A profile names DeviceClasses (``dra.deviceClassNames``). For each, the class that counts is the
cluster's when it has one (the scheduler allocates with that one, broken or not), else the
profile's copy (``dra.deviceClasses``: for EFA, the aws-dranet chart's, rendered from the chart),
else the old ``dra.drivers`` + ``dra.attributes`` form read as a selector; the status says
which. A device is the fabric's when one of these selects it (``core.cel``); the count is what a
ResourceClaim of the first class, the one the recommendation names, can get (a claim names one
class): devices only the others select, or tainted ones, are the fabric's but not counted.

Evaluating costs: a p5.48xlarge slice holds 32 devices, a cluster 10,000 slices. Two devices
that agree on what a class reads get the same outcome, so ``DeviceSelector`` keys its cache on
exactly that: for the aws-dranet class, the driver and ``pciDevice``, so 340,000 devices are two
or three evaluations; a class that reads the whole device (it iterates the attributes) keys on
the whole content. Errors are kept per (class, cause) with a count and one example, so each is
reported once, however many devices share it.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from fabriccap.core.cel import (
    CompileError,
    Outcome,
    Read,
    Selector,
    Verdict,
    compile_selector,
    content_key,
    evaluate,
    one_line,
    projected_key,
)
from fabriccap.core.config import FabricProfile
from fabriccap.core.counters import Demand

# Implicit extended resource of every DeviceClass (KEP-5004; k8s.io/api@v0.35.4 resource/v1
# ResourceDeviceClassPrefix): a pod may request ``deviceclass.resource.kubernetes.io/<class>``.
IMPLICIT_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"


def implicit_resource(class_name: str) -> str:
    return f"{IMPLICIT_RESOURCE_PREFIX}{class_name}"


@dataclass(frozen=True, slots=True)
class DeviceClassFacts:
    """A cluster's DeviceClass, as much as selection and KEP-5004 read of it."""

    name: str
    expressions: tuple[str, ...]
    extended_resource_name: str | None = None
    # metadata.creationTimestamp (RFC 3339, so it sorts as text): of two classes mapping one
    # extended resource, the scheduler uses the one created later.
    created: str = ""
    # Why its selectors could not be read (the class then selects nothing, as it would fail
    # to compile in the scheduler).
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class TaintRuleFacts:
    """A DeviceTaintRule whose taint keeps devices from the recommended claim (KEP-5055): it
    taints, from outside their slices, the devices its ``spec.deviceSelector`` matches, "the
    same effect as if the taint was specified directly in the ResourceSlice". A rule whose
    taint does not (effect None, or one this code does not know: ``blocking_taint``) is not
    held.

    Matching is kube-scheduler's (k8s.io/dynamic-resource-allocation@v0.35.4
    resourceslice/tracker/tracker.go ``applyPatches``): each of driver, pool and device that is
    set must equal the slice's ``spec.driver``, ``spec.pool.name`` and the device's name; one
    not set matches any. A rule without a selector matches every device there: the API's
    comment says no device, but the scheduler taints them all, so this counts none of them."""

    name: str  # cleaned and bounded (facts.object_name)
    effect: str  # cleaned and bounded, for messages
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    # The selector fields this code cannot evaluate (v1alpha3 before Kubernetes 1.35 had
    # ``deviceClassName`` and CEL ``selectors``), when the rule has any: they are taken to
    # match (fail closed: a device they would spare is not counted), and messages say so.
    unevaluated: tuple[str, ...] = ()

    def matches_slice(self, driver: str, pool: str) -> bool:
        """Whether it may match devices of a slice of ``driver`` and ``pool``."""
        return (self.driver is None or self.driver == driver) and (self.pool is None or self.pool == pool)

    def matches(self, driver: str, pool: str, device: str) -> bool:
        return self.matches_slice(driver, pool) and (self.device is None or self.device == device)

    def describe(self) -> str:
        """The rule in messages: ``DeviceTaintRule drain-node-3 (NoSchedule)``."""
        return f"DeviceTaintRule {self.name} ({self.effect})"

    def caveat(self) -> str | None:
        """What a message adds when part of the selector was taken to match, or None."""
        if not self.unevaluated:
            return None
        return f"its selector's {', '.join(self.unevaluated)} not evaluated here, taken to match"


class SliceRules(NamedTuple):
    """The DeviceTaintRules that may match devices of one slice's (driver, pool), ready to match
    a device by its name at the cost of two lookups."""

    # Per device name, the first rule by name that names it (before ``any_device``).
    by_device: Mapping[str, TaintRuleFacts]
    # The first rule by name that names no device, if any.
    any_device: TaintRuleFacts | None

    def first_match(self, device: str) -> TaintRuleFacts | None:
        """The first rule by name that taints ``device``."""
        return self.by_device.get(device, self.any_device)


class TaintRules:
    """The DeviceTaintRules held, indexed by what they name of (driver, pool), a name not set
    being a wildcard bucket of its own: reading a slice costs the rules that can match it, not
    all of them (a GPU health controller may hold thousands, one per device)."""

    __slots__ = ("_by_scope", "_rules")

    def __init__(self, rules: Iterable[TaintRuleFacts] = ()) -> None:
        self._rules = tuple(sorted(rules, key=_rule_name))
        self._by_scope: dict[tuple[str | None, str | None], list[TaintRuleFacts]] = {}
        for rule in self._rules:  # in name order, so every bucket is too
            self._by_scope.setdefault((rule.driver, rule.pool), []).append(rule)

    def __iter__(self) -> Iterator[TaintRuleFacts]:
        return iter(self._rules)

    def __len__(self) -> int:
        return len(self._rules)

    def for_slice(self, driver: str, pool: str) -> SliceRules | None:
        """The rules that may match devices of ``driver`` and ``pool``; None when none can."""
        if not self._by_scope:
            return None
        buckets = [
            bucket
            for scope in ((driver, pool), (driver, None), (None, pool), (None, None))
            if (bucket := self._by_scope.get(scope))
        ]
        if not buckets:
            return None
        by_device: dict[str, TaintRuleFacts] = {}
        for rule in heapq.merge(*buckets, key=_rule_name):
            if rule.device is None:
                # Every later rule comes after it by name: none of them is the first match.
                return SliceRules(by_device, rule)
            by_device.setdefault(rule.device, rule)
        return SliceRules(by_device, None)

    def signature(self, drivers: frozenset[str] | None) -> Hashable:
        """What the counts of slices read with these rules depend on, when only devices of
        ``drivers`` (None: any) can be counted: the rules that name one of them or no driver,
        with what they match. Not the effect: every rule held blocks (a rule whose effect does
        not is not held), and which effect shows only in messages, read when they are made."""
        return tuple(
            (rule.name, rule.driver, rule.pool, rule.device)
            for rule in self._rules
            if rule.driver is None or drivers is None or rule.driver in drivers
        )

    def covering(self, drivers: frozenset[str] | None) -> tuple[TaintRuleFacts, ...]:
        """Rules that together taint every device of ``drivers`` (None: of any driver) wherever
        it is published, on a node not launched yet too: rules that name no pool and no device,
        and whose whole selector is evaluated here (one taken to match may spare some). Empty
        when they do not provably cover them all."""
        wide = [rule for rule in self._by_scope.get((None, None), ()) if rule.device is None and not rule.unevaluated]
        if wide:
            return (wide[0],)
        if not drivers:
            return ()
        found = []
        for driver in sorted(drivers):
            scope = self._by_scope.get((driver, None), ())
            rule = next((rule for rule in scope if rule.device is None and not rule.unevaluated), None)
            if rule is None:
                return ()
            found.append(rule)
        return tuple(found)

    def first_match(self, driver: str, pool: str, device: str) -> TaintRuleFacts | None:
        """The first rule by name that taints ``device`` of ``driver`` and ``pool``, if any."""
        rules = self.for_slice(driver, pool)
        return rules.first_match(device) if rules is not None else None


def _rule_name(rule: TaintRuleFacts) -> str:
    return rule.name


NO_TAINT_RULES = TaintRules()


@dataclass(frozen=True, slots=True)
class DeviceClassView:
    """What slices are read with: the cluster's DeviceClasses of interest and its
    DeviceTaintRules that keep devices from a claim (by name order), with a version that
    changes whenever either does (what is derived from them is kept until then)."""

    version: int
    classes: Mapping[str, DeviceClassFacts]
    taint_rules: TaintRules = NO_TAINT_RULES


NO_CLASSES = DeviceClassView(0, {})


class ClassSource(StrEnum):
    """Where the class that counts for a name comes from."""

    CLUSTER = "cluster"
    COPY = "copy"  # the profile's copy: the cluster has no class of that name
    ATTRIBUTES = "attributes"  # the old dra.attributes form, standing in for it: no copy either
    MISSING = "missing"  # neither the cluster nor the profile has it


@dataclass(frozen=True, slots=True)
class EffectiveClass:
    """One class a fabric's devices are selected with, compiled."""

    name: str
    source: ClassSource
    copy_origin: str  # what stands in for it: "the aws-dranet-1.0.0 chart's copy", "the dra.attributes selector"
    selectors: tuple[Selector, ...]
    # Why it selects nothing at all: a selector that does not compile, or no class to be had.
    error: str | None
    # What every selector reads, when each only does named reads: the cache key's parts.
    projection: tuple[Read, ...] | None

    @property
    def expressions(self) -> tuple[str, ...]:
        return tuple(selector.expression for selector in self.selectors)

    @property
    def drivers(self) -> frozenset[str] | None:
        """The drivers whose devices alone it can select (its selectors must all be true, so
        one that pins the driver pins the class: cel.References.drivers); None when its
        selectors do not say, and nothing when it is broken."""
        if self.error is not None:
            return frozenset()
        pinned = [drivers for selector in self.selectors if (drivers := selector.references.drivers) is not None]
        return frozenset.intersection(*pinned) if pinned else None

    def describe(self) -> str:
        """The class in messages: ``DeviceClass efa.networking.k8s.aws``."""
        return f"DeviceClass {self.name}"

    @property
    def stands_in(self) -> bool:
        """Counted with something other than the cluster's class (the scheduler knows none)."""
        return self.source in (ClassSource.COPY, ClassSource.ATTRIBUTES)


def _compiled(name: str, source: ClassSource, origin: str, expressions: Sequence[str]) -> EffectiveClass:
    selectors: list[Selector] = []
    for position, expression in enumerate(expressions):
        try:
            selectors.append(compile_selector(expression))
        except CompileError as error:
            return EffectiveClass(name, source, origin, (), f"selector #{position}: {error}", None)
    projection = None
    if all(selector.references.named_reads_only for selector in selectors):
        projection = tuple(sorted({read for selector in selectors for read in selector.references.reads}))
    return EffectiveClass(name, source, origin, tuple(selectors), None, projection)


@dataclass(frozen=True, slots=True)
class FabricSelection:
    """A fabric's classes as they stand: what its devices are selected with."""

    fabric: str
    classes: tuple[EffectiveClass, ...]
    # KEP-5004: the cluster maps the profile's extended resource to one of these classes
    # (``spec.extendedResourceName``), so ``resource: N`` can be served from DRA devices.
    extended_resource_class: str | None

    @property
    def signature(self) -> Hashable:
        """What the devices' outcomes depend on: a slice read under another signature must be
        read again. Where a class comes from does not change what it selects."""
        return tuple((effective.name, effective.expressions, effective.error is None) for effective in self.classes)

    @property
    def recommended_drivers(self) -> frozenset[str] | None:
        """The drivers whose devices the recommended claim's class can select (what taints,
        and so DeviceTaintRules, can take from the count); None when any driver's may be."""
        return self.classes[0].drivers if self.classes else frozenset()

    def of_source(self, source: ClassSource) -> list[EffectiveClass]:
        return [effective for effective in self.classes if effective.source is source]


def extended_resource_class(resource: str, cluster: Mapping[str, DeviceClassFacts]) -> str | None:
    """The class the scheduler serves ``resource`` from under KEP-5004: of the classes whose
    ``extendedResourceName`` it is, the one created last, then the first by name."""
    mapping = [facts for facts in cluster.values() if facts.extended_resource_name == resource]
    if not mapping:
        return None
    latest = max(facts.created for facts in mapping)
    return min(facts.name for facts in mapping if facts.created == latest)


def fabric_selection(profile: FabricProfile, cluster: Mapping[str, DeviceClassFacts]) -> FabricSelection:
    """The classes a fabric's devices are selected with, given the cluster's DeviceClasses (by
    name; only those a profile names or that map a profile's resource need be there)."""
    classes: list[EffectiveClass] = []
    for name in profile.dra.device_class_names:
        facts = cluster.get(name)
        copy = profile.dra.copy_of(name)
        if facts is not None:
            if facts.problem is not None:
                classes.append(EffectiveClass(name, ClassSource.CLUSTER, "", (), facts.problem, None))
            else:
                classes.append(_compiled(name, ClassSource.CLUSTER, "", facts.expressions))
        elif copy is not None:
            classes.append(_compiled(name, ClassSource.COPY, f"{copy.origin} copy", copy.expressions))
        elif (legacy := profile.dra.attribute_selector) is not None:
            classes.append(_compiled(name, ClassSource.ATTRIBUTES, "the dra.attributes selector", (legacy,)))
        else:
            error = "it is not in the cluster, and the profile has no copy of it (dra.deviceClasses)"
            classes.append(EffectiveClass(name, ClassSource.MISSING, "", (), error, None))
    mapped = extended_resource_class(profile.resource, cluster)
    return FabricSelection(
        fabric=profile.name,
        classes=tuple(classes),
        extended_resource_class=mapped if mapped in profile.dra.device_class_names else None,
    )


class ClassError(NamedTuple):
    """Devices one class failed on, for one cause."""

    class_name: str
    cause: str
    devices: int
    example: str  # one device's name


class DeviceCount(NamedTuple):
    """What one fabric's classes make of one slice's devices."""

    selected: int
    errors: tuple[ClassError, ...] = ()
    # Devices the classes select that carry a taint the recommended claim does not tolerate:
    # not in ``selected``, counted apart so the status can say why they are missing.
    tainted: int = 0
    # Devices only the fabric's other classes select, not the one the recommended claim names:
    # the fabric's, but not in ``selected``.
    other_classes: int = 0
    # What the ``selected`` devices that draw on shared counters take (core.counters): they are
    # in ``selected``, and the pool's counters, which may be in another slice, say how many of
    # them can be had at once.
    demands: tuple[Demand, ...] = ()
    # Devices the recommended class selects that carry no such taint of their own but that a
    # DeviceTaintRule taints, per rule (by name; a device two rules match counts for the first
    # by name): not in ``selected`` either.
    rule_tainted: tuple[tuple[str, int], ...] = ()


NO_DEVICES = DeviceCount(0)

# The device-taint effects that keep a device from a claim that does not tolerate them. The
# allocators that run with DeviceTaints on (k8s.io/dynamic-resource-allocation@v0.35.4
# structured/internal/{incubating,experimental}, stable at v0.36.2, ``taintPreventsAllocation``)
# say "Only known effects prevent allocation, others (including None) are ignored", and KEP-5055's
# API says "Consumers must treat unknown effects like None": an effect a newer server stored is
# counted. A taint that cannot be read at all (not a mapping, an effect that is not a string)
# is taken to block: failing closed, such a device is missing from the count.
BLOCKING_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def blocking_taint(taint: object) -> bool:
    """Whether one taint (a device's ``taints[]`` entry, or a DeviceTaintRule's ``spec.taint``)
    keeps the device from a claim without tolerations: NoSchedule and NoExecute, and a taint
    that cannot be read (fail closed); None and effects this code does not know do not."""
    if not isinstance(taint, Mapping):
        return True
    effect = taint.get("effect")
    return not isinstance(effect, str) or effect in BLOCKING_TAINT_EFFECTS


def untolerated_taint(device: Mapping[str, Any]) -> bool:
    """Whether ``device`` (resource.k8s.io/v1 ``spec.devices[]``) carries a taint that a claim
    without tolerations does not tolerate. The recommended ResourceClaimTemplate carries none,
    and kube-scheduler skips such a device for it (k8s.io/dynamic-resource-allocation
    structured/internal/stable/allocator_stable.go, ``allocateDevice``: ``if
    alloc.features.DeviceTaints && !allTaintsTolerated(device, request) { return false, ... }``;
    DRADeviceTaints is on by default from Kubernetes 1.36, and with it off the API server drops
    the field, so a taint that is there is one the scheduler sees).
    The taints DeviceTaintRules add from outside the slice are ``TaintRuleFacts``, read with
    ``blocking_taint`` too and matched in ``DeviceSelector.count``."""
    taints = device.get("taints")
    if not taints:
        return False
    if not isinstance(taints, list):
        return True  # unreadable: fail closed
    return any(blocking_taint(taint) for taint in taints)


# A cache of outcomes larger than this is emptied: a hostile set of distinct devices read by a
# class that reads everything could otherwise grow it without end.
MAX_CACHED_OUTCOMES = 200_000


class DeviceSelector:
    """Evaluates classes on devices, once per distinct thing they read."""

    def __init__(self) -> None:
        self._outcomes: dict[tuple[tuple[str, ...], Hashable], Outcome] = {}
        self.evaluations = 0  # uncached evaluations, for tests and benchmarks

    def outcome(self, effective: EffectiveClass, driver: str, device: Mapping[str, Any]) -> Outcome:
        if effective.error is not None:
            return Outcome(Verdict.NOT_SELECTED)
        key = (
            projected_key(driver, device, effective.projection)
            if effective.projection is not None
            else content_key(driver, device)
        )
        cache_key = (effective.expressions, key)
        outcome = self._outcomes.get(cache_key)
        if outcome is None:
            if len(self._outcomes) >= MAX_CACHED_OUTCOMES:
                self._outcomes.clear()
            self.evaluations += 1
            outcome = self._outcomes[cache_key] = evaluate(effective.selectors, driver, device)
        return outcome

    def count(
        self,
        selection: FabricSelection,
        driver: str,
        devices: Sequence[Mapping[str, Any]],
        demands: Sequence[Demand] = (),
        pool: str = "",
        taint_rules: TaintRules = NO_TAINT_RULES,
    ) -> DeviceCount:
        """How many of ``devices`` a claim of the fabric's first class (the one the recommended
        ResourceClaimTemplate names) can be allocated, the errors met, and how many of the
        fabric's devices that claim cannot get: tainted, or selected by its other classes only.
        ``demands``, when given, are the devices' counter demands, in their order: those of the
        devices counted are kept (core.counters bounds them per pool). ``taint_rules`` taint
        the devices of the slice's ``pool`` (its ``spec.pool.name``) they match.

        Not the union of the classes: a claim names one class, and the allocator takes only
        devices that class's selectors select (allocator_stable.go ``isSelectable`` →
        ``selectorsMatch`` over ``request.DeviceClassName``'s class), so ``exactCount: N`` of
        the first class needs N devices of that class on the node."""
        selected = tainted = elsewhere = 0
        errors: dict[tuple[str, str], list[Any]] = {}
        classes = [effective for effective in selection.classes if effective.error is None]
        if not classes:
            return NO_DEVICES
        recommended = selection.classes[0]  # a broken one is not in ``classes``: nothing counts
        counted_demands: list[Demand] = []
        by_rule: dict[str, int] = {}
        rules = taint_rules.for_slice(driver, pool)
        for position, device in enumerate(devices):
            chosen = other = False
            for effective in classes:
                outcome = self.outcome(effective, driver, device)
                if outcome.verdict is Verdict.SELECTED:
                    if effective is recommended:
                        chosen = True
                    else:
                        other = True
                elif outcome.verdict is Verdict.ERROR:
                    entry = errors.setdefault((effective.name, outcome.cause or "error"), [0, device.get("name")])
                    entry[0] += 1
            # The scheduler checks taints after the selectors (``isSelectable`` first), so a
            # tainted device's selector error still counts as one; a selected one is set apart.
            if chosen and untolerated_taint(device):
                tainted += 1
            elif chosen and rules is not None and (rule := rules.first_match(_device_name(device))) is not None:
                by_rule[rule.name] = by_rule.get(rule.name, 0) + 1
            elif chosen:
                selected += 1
                if position < len(demands) and demands[position]:
                    counted_demands.append(demands[position])
            elif other:
                elsewhere += 1
        return DeviceCount(
            selected,
            tuple(
                ClassError(name, cause, count, one_line(str(example or "?"), 80))
                for (name, cause), (count, example) in sorted(errors.items())
            ),
            tainted,
            elsewhere,
            tuple(counted_demands),
            tuple(sorted(by_rule.items())),
        )


def _device_name(device: Mapping[str, Any]) -> str:
    name = device.get("name")
    return name if isinstance(name, str) else ""
