"""DeviceClass CEL selectors, compiled and evaluated the way kube-scheduler does.

A DRA device belongs to a DeviceClass when every CEL selector of the class is true for it. The
scheduler gives the expression one variable, ``device``, with the driver's name, the device's
attributes and capacities by domain, and ``allowMultipleAllocations``
(k8s.io/dynamic-resource-allocation@v0.35.4 ``cel/compile.go``). This module gives the same
variable, with the same types, to Google's CEL runtime (``cel-expr-python``, cel-cpp): it
type-checks as the scheduler does (``device.drivr`` and a non-bool result are compile errors),
and has ``cel.bind``, optional fields (``.?x.orValue()``) and the strings extension, which
Kubernetes' own examples and fixes use. Semantics, limits and every known difference from
Kubernetes are in docs/dra.md.

Values: ints, bools and strings are CEL's own; versions are ``kubernetes.Semver`` and
capacities ``kubernetes.Quantity``, protobuf messages whose fields make CEL's ``==`` compare
as Kubernetes does (build metadata ignored; ``1Gi == 1073741824``). Kubernetes' semver and
quantity functions (``semver()``, ``isGreaterThan()``, ``quantity()``, ...) are implemented
here in Python; cel-expr-python 0.1.3 leaks a little memory on each call of a Python function,
so callers evaluate a distinct device once and cache the outcome (``core.selection``).

Bounds, as the API server and the scheduler bound a selector: at most 10 KiB of text; a
worst-case cost, estimated at compile time from the largest inputs the API allows, of at most
``CEL_SELECTOR_EXPRESSION_MAX_COST`` (a selector above it is refused, as the API server refuses
to store it); and at run time cel-cpp stops any evaluation after 10,000 loop iterations.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

import cel_expr_python.cel as cel
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from fabriccap.core.quantity import exact_quantity

# --- Kubernetes' limits (k8s.io/api@v0.35.4 resource/v1/types.go) ------------------------------
CEL_SELECTOR_EXPRESSION_MAX_LENGTH = 10 * 1024  # CELSelectorExpressionMaxLength
CEL_SELECTOR_EXPRESSION_MAX_COST = 1_000_000  # CELSelectorExpressionMaxCost, per evaluation
DEVICE_SELECTORS_MAX_SIZE = 32  # DeviceClassSpec.selectors, +k8s:maxItems=32
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64  # DeviceAttributeMaxValueLength
ATTRIBUTES_AND_CAPACITIES_PER_DEVICE = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
DRIVER_NAME_MAX_LENGTH = 63  # DriverNameMaxLength
# cel-cpp stops one evaluation after this many comprehension iterations ("Iteration budget
# exceeded"); cel-expr-python does not let it be changed. Measured with cel-expr-python 0.1.3.
RUNTIME_ITERATION_BUDGET = 10_000
# The cause said for a selector that ran past it: this evaluator's limit, not Kubernetes' (whose
# is a cost of CEL_SELECTOR_EXPRESSION_MAX_COST, which 10,000 iterations can stay well under).
ITERATION_BUDGET_CAUSE = f"cost limit exceeded: more than {RUNTIME_ITERATION_BUDGET} loop iterations"

# Causes and compile errors are repeated in statuses and logs: one line, bounded.
MAX_CAUSE_LENGTH = 200


def one_line(text: str, limit: int = MAX_CAUSE_LENGTH) -> str:
    """``text`` as one printable line of at most ``limit`` characters."""
    collapsed = " ".join(text.split())
    printable = "".join(ch if ch.isprintable() else "?" for ch in collapsed[: limit * 2])
    return printable if len(printable) <= limit else printable[: limit - 3] + "..."


# --- kubernetes.Semver and kubernetes.Quantity --------------------------------------------------
# cel-expr-python passes protobuf messages into CEL, not Python objects, so both types are small
# messages of a descriptor pool built here. Their fields are chosen so that message equality is
# Kubernetes' equality: a version without its build metadata, a quantity as a reduced fraction.


def _type_pool() -> descriptor_pool.DescriptorPool:
    string, int64 = descriptor_pb2.FieldDescriptorProto.TYPE_STRING, descriptor_pb2.FieldDescriptorProto.TYPE_INT64
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    proto = descriptor_pb2.FileDescriptorProto(
        name="fabriccap/kubernetes_cel.proto", package="kubernetes", syntax="proto3"
    )
    semver = proto.message_type.add(name="Semver")
    for number, (name, kind) in enumerate((("major", int64), ("minor", int64), ("patch", int64), ("pre", string)), 1):
        semver.field.add(name=name, number=number, type=kind, label=optional)
    quantity = proto.message_type.add(name="Quantity")
    # Decimal strings: a quantity's numerator can exceed int64 (1e30).
    quantity.field.add(name="numerator", number=1, type=string, label=optional)
    quantity.field.add(name="denominator", number=2, type=string, label=optional)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return pool


TYPE_POOL = _type_pool()
_SemverMessage: Any = message_factory.GetMessageClass(TYPE_POOL.FindMessageTypeByName("kubernetes.Semver"))
_QuantityMessage: Any = message_factory.GetMessageClass(TYPE_POOL.FindMessageTypeByName("kubernetes.Quantity"))
SEMVER = cel.Type("kubernetes.Semver")
QUANTITY = cel.Type("kubernetes.Quantity")


class InvalidValueError(ValueError):
    """A version or a quantity that Kubernetes would not accept (the scheduler then fails every
    selector on the device that carries it)."""


_NUMERIC = re.compile(r"0|[1-9][0-9]*", re.ASCII)
_IDENTIFIER = re.compile(r"[0-9A-Za-z-]+", re.ASCII)


@functools.lru_cache(maxsize=4096)
def parse_semver(text: str) -> tuple[int, int, int, str]:
    """Strict semver 2.0.0, as github.com/blang/semver/v4 ``Parse`` (the scheduler's): three
    numbers without leading zeros, an optional pre-release, optional build metadata."""
    core, _, build = text.partition("+")
    core, has_pre, pre = core.partition("-")
    numbers = core.split(".")
    if len(numbers) != 3 or not all(_NUMERIC.fullmatch(number) for number in numbers):
        raise InvalidValueError(f"invalid semantic version {one_line(repr(text), 80)}")
    for part in pre.split(".") if has_pre else ():
        if not _IDENTIFIER.fullmatch(part) or (part.isdigit() and not _NUMERIC.fullmatch(part)):
            raise InvalidValueError(f"invalid semantic version {one_line(repr(text), 80)}")
    for part in build.split(".") if "+" in text else ():
        if not _IDENTIFIER.fullmatch(part):
            raise InvalidValueError(f"invalid semantic version {one_line(repr(text), 80)}")
    return int(numbers[0]), int(numbers[1]), int(numbers[2]), pre


@functools.lru_cache(maxsize=4096)
def semver_value(text: str) -> Any:
    """The ``kubernetes.Semver`` of ``text`` (cached: the same few versions repeat on every
    device, and a message passed to CEL is never changed)."""
    major, minor, patch, pre = parse_semver(text)
    return _SemverMessage(major=major, minor=minor, patch=patch, pre=pre)


def _normalized_semver(text: str) -> str:
    """``semver(s, true)``: a leading ``v`` dropped, missing minor and patch filled with 0,
    leading zeros dropped (k8s.io/apiserver semverlib's normalisation)."""
    match = re.match(r"([0-9.]*)(.*)", text.removeprefix("v"), re.DOTALL)
    core, rest = (match.group(1), match.group(2)) if match else ("", text)
    numbers = [number.lstrip("0") or "0" for number in core.split(".")] if core else []
    numbers += ["0"] * (3 - len(numbers))
    return ".".join(numbers) + rest


def _prerelease_rank(pre: str) -> tuple[int, tuple[tuple[int, int, str], ...]]:
    # A version without a pre-release ranks above every pre-release of it (semver 11).
    if not pre:
        return (1, ())
    return (0, tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in pre.split(".")))


def _semver_order(value: Any) -> tuple[int, int, int, tuple[int, tuple[tuple[int, int, str], ...]]]:
    return (value.major, value.minor, value.patch, _prerelease_rank(value.pre))


@functools.lru_cache(maxsize=4096)
def _quantity_of(text: str) -> Any:
    try:
        return quantity_value(exact_quantity(text))
    except ValueError as error:
        raise InvalidValueError(str(error)) from None


def quantity_value(amount: Fraction) -> Any:
    """The ``kubernetes.Quantity`` of an exact amount."""
    return _QuantityMessage(numerator=str(amount.numerator), denominator=str(amount.denominator))


def quantity_amount(message: Any) -> Fraction:
    return Fraction(int(message.numerator), int(message.denominator))


def _kind(value: Any) -> str:
    descriptor = getattr(value, "DESCRIPTOR", None)
    return str(descriptor.full_name) if descriptor is not None else type(value).__name__


def _compare(left: Any, right: Any) -> int:
    """``compareTo`` of two Semvers or two Quantities; anything else is "no such overload"."""
    kinds = (_kind(left), _kind(right))
    if kinds == ("kubernetes.Semver", "kubernetes.Semver"):
        semvers = _semver_order(left), _semver_order(right)
        return (semvers[0] > semvers[1]) - (semvers[0] < semvers[1])
    if kinds == ("kubernetes.Quantity", "kubernetes.Quantity"):
        amounts = quantity_amount(left), quantity_amount(right)
        return (amounts[0] > amounts[1]) - (amounts[0] < amounts[1])
    raise TypeError(f"no such overload: {kinds[0]}.compareTo({kinds[1]})")


def _is_valid(parse: Callable[[str], object], text: str) -> bool:
    try:
        parse(text)
    except InvalidValueError:
        return False
    return True


def _as_integer(value: Any) -> int:
    amount = quantity_amount(value)
    if amount.denominator != 1 or not -(2**63) <= amount.numerator < 2**63:
        raise ValueError("cannot convert value to integer")
    return amount.numerator


def _overload(name: str, result: Any, params: list[Any], impl: Callable[..., Any], *, member: bool) -> Any:
    return cel.Overload(name, result, params, is_member=member, impl=impl)


def _kubernetes_functions() -> list[Any]:
    """Kubernetes' semver and quantity libraries (k8s.io/apiserver pkg/cel/library semverlib.go
    and quantity.go), as documented there: an implementation of their behaviour, not a port."""
    t = cel.Type
    compare_overloads = (
        ("isGreaterThan", t.BOOL, lambda a, b: _compare(a, b) > 0),
        ("isLessThan", t.BOOL, lambda a, b: _compare(a, b) < 0),
        ("compareTo", t.INT, _compare),
    )
    return [
        cel.FunctionDecl(
            "semver",
            [
                _overload("string_to_semver", SEMVER, [t.STRING], semver_value, member=False),
                _overload(
                    "string_bool_to_semver",
                    SEMVER,
                    [t.STRING, t.BOOL],
                    lambda s, normalize: semver_value(_normalized_semver(s) if normalize else s),
                    member=False,
                ),
            ],
        ),
        cel.FunctionDecl(
            "isSemver",
            [
                _overload("is_semver_string", t.BOOL, [t.STRING], lambda s: _is_valid(parse_semver, s), member=False),
                _overload(
                    "is_semver_string_bool",
                    t.BOOL,
                    [t.STRING, t.BOOL],
                    lambda s, normalize: _is_valid(parse_semver, _normalized_semver(s) if normalize else s),
                    member=False,
                ),
            ],
        ),
        cel.FunctionDecl("major", [_overload("semver_major", t.INT, [SEMVER], lambda v: v.major, member=True)]),
        cel.FunctionDecl("minor", [_overload("semver_minor", t.INT, [SEMVER], lambda v: v.minor, member=True)]),
        cel.FunctionDecl("patch", [_overload("semver_patch", t.INT, [SEMVER], lambda v: v.patch, member=True)]),
        cel.FunctionDecl(
            "quantity", [_overload("string_to_quantity", QUANTITY, [t.STRING], _quantity_of, member=False)]
        ),
        cel.FunctionDecl(
            "isQuantity",
            [_overload("is_quantity_string", t.BOOL, [t.STRING], lambda s: _is_valid(_quantity_of, s), member=False)],
        ),
        # cel-cpp's runtime picks an overload by the arguments' kinds, and both types are of the
        # kind "message", so one implementation serves both (it compares by message type); the
        # Quantity overload is declared for the type checker only.
        *(
            cel.FunctionDecl(
                name,
                [
                    _overload(f"semver_{name}", result, [SEMVER, SEMVER], impl, member=True),
                    cel.Overload(f"quantity_{name}", result, [QUANTITY, QUANTITY], is_member=True),
                ],
            )
            for name, result, impl in compare_overloads
        ),
        cel.FunctionDecl(
            "sign",
            [
                _overload(
                    "quantity_sign", t.INT, [QUANTITY], lambda q: _compare(q, quantity_value(Fraction(0))), member=True
                )
            ],
        ),
        cel.FunctionDecl(
            "isInteger",
            [
                _overload(
                    "quantity_is_integer",
                    t.BOOL,
                    [QUANTITY],
                    lambda q: quantity_amount(q).denominator == 1,
                    member=True,
                )
            ],
        ),
        cel.FunctionDecl("asInteger", [_overload("quantity_as_integer", t.INT, [QUANTITY], _as_integer, member=True)]),
        cel.FunctionDecl(
            "asApproximateFloat",
            [_overload("quantity_as_float", t.DOUBLE, [QUANTITY], lambda q: float(quantity_amount(q)), member=True)],
        ),
        cel.FunctionDecl(
            "add",
            [
                _overload(
                    "quantity_add",
                    QUANTITY,
                    [QUANTITY, QUANTITY],
                    lambda a, b: quantity_value(quantity_amount(a) + quantity_amount(b)),
                    member=True,
                ),
                _overload(
                    "quantity_add_int",
                    QUANTITY,
                    [QUANTITY, t.INT],
                    lambda a, b: quantity_value(quantity_amount(a) + b),
                    member=True,
                ),
            ],
        ),
        cel.FunctionDecl(
            "sub",
            [
                _overload(
                    "quantity_sub",
                    QUANTITY,
                    [QUANTITY, QUANTITY],
                    lambda a, b: quantity_value(quantity_amount(a) - quantity_amount(b)),
                    member=True,
                ),
                _overload(
                    "quantity_sub_int",
                    QUANTITY,
                    [QUANTITY, t.INT],
                    lambda a, b: quantity_value(quantity_amount(a) - b),
                    member=True,
                ),
            ],
        ),
    ]


# --- The environment ----------------------------------------------------------------------------
# The scheduler declares ``device`` as an object type with typed fields. cel-expr-python cannot
# declare such a type without protobuf maps of maps, so each field is a qualified variable
# (``device.driver``...): CEL resolves ``device.driver`` to it, the checker knows its type, and
# the checked AST names it as one identifier. Difference: ``device`` alone is undeclared.
# ``allowMultipleAllocations`` is always declared: the scheduler compiles with the "stored
# expressions" environment, which ignores feature gates (k8s.io/apiserver@v0.35.4
# pkg/cel/environment/environment.go), so it compiles even with DRAConsumableCapacity off.
DEVICE_DRIVER = "device.driver"
DEVICE_ATTRIBUTES = "device.attributes"
DEVICE_CAPACITY = "device.capacity"
DEVICE_MULTIPLE_ALLOCATIONS = "device.allowMultipleAllocations"
MULTIPLE_ALLOCATIONS_FIELD = "allowMultipleAllocations"  # the v1 Device field


def _environment(extensions: list[Any]) -> Any:
    t = cel.Type
    return cel.NewEnv(
        TYPE_POOL,
        variables={
            DEVICE_DRIVER: t.STRING,
            DEVICE_ATTRIBUTES: t.Map(t.STRING, t.Map(t.STRING, t.DYN)),
            DEVICE_CAPACITY: t.Map(t.STRING, t.Map(t.STRING, QUANTITY)),
            DEVICE_MULTIPLE_ALLOCATIONS: t.BOOL,
        },
        extensions=extensions,
        functions=_kubernetes_functions(),
    )


@functools.lru_cache(maxsize=1)
def base_environment() -> Any:
    """CEL with Kubernetes' functions and none of the extensions: what most selectors need
    (aws-dranet's EFA class compares the driver and an attribute)."""
    return _environment([])


@functools.lru_cache(maxsize=1)
def environment() -> Any:
    """CEL as the scheduler has it: with ``cel.bind``, optional fields and the strings extension.

    Imported the first time a selector needs one of them. Each extension is a native module of
    its own, and the three took 7.8 MiB of the operator's RSS (``/proc/self/status`` around
    their imports, cel-expr-python 0.1.3), loaded for every selector though few use them. The
    extensions only add to the base (a macro, the ``.?`` syntax, functions the base does not
    declare), so a selector the base compiles means the same in both."""
    import cel_expr_python.ext.ext_bindings as ext_bindings
    import cel_expr_python.ext.ext_optional as ext_optional
    import cel_expr_python.ext.ext_strings as ext_strings

    return _environment([ext_bindings.ExtBindings(), ext_optional.ExtOptional(), ext_strings.ExtStrings()])


# --- The checked AST ------------------------------------------------------------------------------
# ``Expression.serialize()`` is a google.protobuf.Any holding a cel.expr.CheckedExpr; the few
# fields read here are decoded from the wire format (field numbers: cel-spec
# proto/cel/expr/syntax.proto and checked.proto). cel-cpp refuses expressions nested more than
# 32 deep, so the recursion below stays shallow.


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, position


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, position = _varint(data, position)
            yield number, value
        elif wire_type == 2:
            length, position = _varint(data, position)
            yield number, data[position : position + length]
            position += length
        elif wire_type in (1, 5):
            width = 8 if wire_type == 1 else 4
            yield number, data[position : position + width]
            position += width
        else:
            raise ValueError(f"unsupported wire type {wire_type}")


def _submessages(data: bytes, wanted: int) -> Iterator[bytes]:
    for number, value in _fields(data):
        if number == wanted and isinstance(value, bytes):
            yield value


@dataclass(eq=False)
class Node:
    """One node of a checked expression: only what the reference and cost analyses read."""

    form: str  # const | ident | select | call | list | map | struct | comprehension
    name: str = ""  # an identifier, a selected field, a called function
    value: object = None  # a constant's value
    target: Node | None = None  # a select's operand; a member call's receiver
    arguments: list[Node] = field(default_factory=list)  # a call's arguments, a list's elements
    test_only: bool = False  # has(x.f)
    entries: list[tuple[Node | None, Node]] = field(default_factory=list)  # map and struct entries
    variables: tuple[str, ...] = ()  # a comprehension's iteration variables
    accumulator: str = ""
    parts: dict[str, Node] = field(default_factory=dict)  # a comprehension's range, init, step...

    def children(self) -> list[Node]:
        found = [self.target] if self.target is not None else []
        found += self.arguments
        for key, value in self.entries:
            found += [key, value] if key is not None else [value]
        return found + list(self.parts.values())


def _constant(data: bytes) -> object:
    for number, value in _fields(data):
        if number == 6 and isinstance(value, bytes):  # string_value
            return value.decode("utf-8", errors="replace")
        if number in (2, 3, 4, 7):  # bool, int64, uint64, bytes
            return value
    return None


def _text(data: bytes, wanted: int) -> str:
    return next((value.decode("utf-8", errors="replace") for value in _submessages(data, wanted)), "")


def _expression(data: bytes) -> Node:
    for number, value in _fields(data):
        if not isinstance(value, bytes):
            continue
        if number == 3:
            return Node("const", value=_constant(value))
        if number == 4:
            return Node("ident", name=_text(value, 1))
        if number == 5:
            operand = next(_submessages(value, 1), None)
            test_only = any(n == 3 and v for n, v in _fields(value))
            return Node(
                "select",
                name=_text(value, 2),
                target=_expression(operand) if operand is not None else None,
                test_only=test_only,
            )
        if number == 6:
            receiver = next(_submessages(value, 1), None)
            return Node(
                "call",
                name=_text(value, 2),
                target=_expression(receiver) if receiver is not None else None,
                arguments=[_expression(argument) for argument in _submessages(value, 3)],
            )
        if number == 7:
            return Node("list", arguments=[_expression(element) for element in _submessages(value, 1)])
        if number == 8:
            entries: list[tuple[Node | None, Node]] = []
            for entry in _submessages(value, 2):
                key = next(_submessages(entry, 3), None)
                entry_value = next(_submessages(entry, 4), None)
                entries.append(
                    (
                        _expression(key) if key is not None else None,
                        _expression(entry_value) if entry_value is not None else Node("const"),
                    )
                )
            message = _text(value, 1)
            return Node("struct" if message else "map", name=message, entries=entries)
        if number == 9:
            names = {1: "", 8: ""}
            parts: dict[str, Node] = {}
            accumulator = ""
            part_names = {2: "range", 4: "init", 5: "condition", 6: "step", 7: "result"}
            for part_number, part in _fields(value):
                if not isinstance(part, bytes):
                    continue
                if part_number in names:
                    names[part_number] = part.decode("utf-8", errors="replace")
                elif part_number == 3:
                    accumulator = part.decode("utf-8", errors="replace")
                elif part_number in part_names:
                    parts[part_names[part_number]] = _expression(part)
            variables = tuple(name for name in (names[1], names[8]) if name)
            return Node("comprehension", variables=variables, accumulator=accumulator, parts=parts)
    return Node("const")


def checked_ast(program: Any) -> Node:
    """The root of a compiled program's checked expression."""
    checked = next(_submessages(program.serialize(), 2), None)  # Any.value
    expression = next(_submessages(checked, 4), None) if checked is not None else None  # CheckedExpr.expr
    if expression is None:
        raise ValueError("the compiled expression carries no checked AST")
    return _expression(expression)


def walk(root: Node) -> Iterator[Node]:
    pending = [root]
    while pending:
        node = pending.pop()
        yield node
        pending.extend(node.children())


# --- What an expression reads from ``device`` -------------------------------------------------


class Read(NamedTuple):
    """One named read: ``device.attributes["dra.net"].pciDevice`` is (attributes, dra.net, pciDevice)."""

    field: str  # "attributes" or "capacity", the v1 Device field
    domain: str
    name: str


_INDEX = ("_[_]", "_[?_]")
_OPTIONAL_SELECT = "_?._"
_FIELD_OF = {DEVICE_ATTRIBUTES: "attributes", DEVICE_CAPACITY: "capacity"}


@dataclass(frozen=True)
class References:
    """What an expression reads of ``device``."""

    # Domains looked up by a constant (``device.attributes["dra.net"]``): the scheduler gives
    # an empty map for an absent one, so they are added, empty, to the variable.
    attribute_domains: frozenset[str]
    capacity_domains: frozenset[str]
    # Every plain named read; with ``named_reads_only`` they are all it reads of the maps, so
    # two devices that agree on them (and on the driver) get the same outcome.
    reads: frozenset[Read]
    named_reads_only: bool
    # The drivers a device must be of for the expression to be true, when it says so outright
    # (``device.driver == "dra.net"``, or ``in`` a list, alone or in an ``&&``); None when it
    # does not, and a device of any driver may be selected.
    drivers: frozenset[str] | None = None


def _parents(root: Node) -> dict[int, Node]:
    return {id(child): node for node in walk(root) for child in node.children()}


def _named_read(node: Node, parents: Mapping[int, Node]) -> Read | None:
    """``node`` is ``device.attributes`` or ``device.capacity``: the read it is part of, if plain."""
    index = parents.get(id(node))
    if index is None or index.form != "call" or index.name not in _INDEX or len(index.arguments) != 2:
        return None
    container, key = index.arguments
    if container is not node or key.form != "const" or not isinstance(key.value, str):
        return None
    reader = parents.get(id(index))
    if reader is not None and reader.form == "select" and reader.target is index:
        return Read(_FIELD_OF[node.name], key.value, reader.name)
    if (
        reader is not None
        and reader.form == "call"
        and reader.name == _OPTIONAL_SELECT
        and len(reader.arguments) == 2
        and reader.arguments[0] is index
        and reader.arguments[1].form == "const"
        and isinstance(reader.arguments[1].value, str)
    ):
        return Read(_FIELD_OF[node.name], key.value, reader.arguments[1].value)
    return None


def references(root: Node) -> References:
    domains: dict[str, set[str]] = {DEVICE_ATTRIBUTES: set(), DEVICE_CAPACITY: set()}
    reads: set[Read] = set()
    named_reads_only = True
    parents = _parents(root)
    for node in walk(root):
        if node.form != "ident" or node.name not in domains:
            continue
        read = _named_read(node, parents)
        if read is None:
            named_reads_only = False  # iterated, bound, sized...: all of the map matters
        else:
            reads.add(read)
        parent = parents.get(id(node))
        if parent is None:
            continue
        if parent.form == "call" and parent.name in _INDEX and len(parent.arguments) == 2:
            key = parent.arguments[1]
            if parent.arguments[0] is node and key.form == "const" and isinstance(key.value, str):
                domains[node.name].add(key.value)
        elif parent.form == "select" and parent.target is node:  # device.attributes.domain
            domains[node.name].add(parent.name)
    return References(
        frozenset(domains[DEVICE_ATTRIBUTES]),
        frozenset(domains[DEVICE_CAPACITY]),
        frozenset(reads),
        named_reads_only,
        pinned_drivers(root),
    )


def pinned_drivers(node: Node) -> frozenset[str] | None:
    """The drivers ``node`` is true only for (References.drivers). CEL's ``&&`` is false when
    either side is, whatever the other (an error included), so one side that pins the driver
    pins the whole; an ``||`` does when each of its sides does."""
    if node.form != "call":
        return None
    if node.name == "_&&_":
        pinned = [drivers for argument in node.arguments if (drivers := pinned_drivers(argument)) is not None]
        return frozenset.intersection(*pinned) if pinned else None
    if node.name == "_||_":
        sides = [drivers for argument in node.arguments if (drivers := pinned_drivers(argument)) is not None]
        return frozenset[str]().union(*sides) if sides and len(sides) == len(node.arguments) else None
    if node.name == "_==_" and len(node.arguments) == 2:
        first, second = node.arguments
        for driver, other in ((first, second), (second, first)):
            if _is_driver(driver) and other.form == "const" and isinstance(other.value, str):
                return frozenset({other.value})
        return None
    if node.name == "@in" and len(node.arguments) == 2:
        driver, listed = node.arguments
        if _is_driver(driver) and listed.form == "list":
            values = [element.value for element in listed.arguments if element.form == "const"]
            if len(values) == len(listed.arguments) and all(isinstance(value, str) for value in values):
                return frozenset(str(value) for value in values)
    return None


def _is_driver(node: Node) -> bool:
    return node.form == "ident" and node.name == DEVICE_DRIVER


# --- The worst-case cost, estimated at compile time ---------------------------------------------
# In the spirit of Kubernetes' estimate (cel-go's checker.Cost with the DRA size estimator): every
# input as large as the API allows. The figures are not Kubernetes' (they run 1-30x higher on
# the cases compared), so a selector close to the limit may be refused here and stored by the
# API server; what matters is that nothing whose work could run away is ever evaluated.


@dataclass(frozen=True)
class Shape:
    size: int  # characters of a string, entries of a list or map; 1 for a scalar
    element: Shape | None = None  # a list's element, a map's value


_SCALAR = Shape(1)
_ATTRIBUTE_VALUE = Shape(DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH, Shape(DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH))
_DOMAIN = Shape(ATTRIBUTES_AND_CAPACITIES_PER_DEVICE, _ATTRIBUTE_VALUE)
_DEVICE_SHAPES = {
    DEVICE_DRIVER: Shape(DRIVER_NAME_MAX_LENGTH),
    DEVICE_ATTRIBUTES: Shape(ATTRIBUTES_AND_CAPACITIES_PER_DEVICE, _DOMAIN),
    DEVICE_CAPACITY: Shape(ATTRIBUTES_AND_CAPACITIES_PER_DEVICE, _DOMAIN),
    DEVICE_MULTIPLE_ALLOCATIONS: _SCALAR,
}
_SIZE_PRESERVING = {"lowerAscii", "upperAscii", "trim", "substring", "charAt", "reverse", "quote", "string", "format"}


def _merge(first: Shape | None, second: Shape | None) -> Shape | None:
    if first is None or second is None:
        return first or second
    return Shape(max(first.size, second.size), _merge(first.element, second.element))


def estimate_cost(root: Node) -> int:
    return _estimate(root, {})[0]


def _estimate(node: Node, scope: Mapping[str, Shape]) -> tuple[int, Shape]:
    if node.form == "const":
        return 1, Shape(len(node.value)) if isinstance(node.value, (str, bytes)) else _SCALAR
    if node.form == "ident":
        return 1, scope.get(node.name) or _DEVICE_SHAPES.get(node.name, _SCALAR)
    if node.form == "select":
        cost, shape = _estimate(node.target, scope) if node.target is not None else (0, _SCALAR)
        return cost + 1, _SCALAR if node.test_only else (shape.element or _SCALAR)
    if node.form in ("list", "map", "struct"):
        items = node.arguments if node.form == "list" else [value for _, value in node.entries]
        cost, element = 1, None
        for item in items:
            item_cost, item_shape = _estimate(item, scope)
            cost += item_cost
            element = _merge(element, item_shape)
        return cost, Shape(len(items), element)
    if node.form == "comprehension":
        return _estimate_comprehension(node, scope)
    return _estimate_call(node, scope)


def _estimate_call(node: Node, scope: Mapping[str, Shape]) -> tuple[int, Shape]:
    arguments = ([node.target] if node.target is not None else []) + node.arguments
    estimates = [_estimate(argument, scope) for argument in arguments]
    cost = 1 + sum(item_cost for item_cost, _ in estimates)
    shapes = [shape for _, shape in estimates]
    sizes = [shape.size for shape in shapes] or [1]
    name = node.name
    if name in _INDEX:
        return cost, shapes[0].element or _SCALAR
    if name == "_+_":  # concatenation: as long as its operands together
        element = None
        for shape in shapes:
            element = _merge(element, shape.element)
        total = sum(sizes)
        return cost + total, Shape(total, element)
    if name == "replace" and len(shapes) >= 3:  # every character (and every gap) replaced
        grown = (shapes[0].size + 1) * (shapes[2].size + 1)
        return cost + grown, Shape(grown)
    if name == "join":
        inner = shapes[0].element.size if shapes[0].element is not None else 1
        joined = shapes[0].size * (inner + (shapes[1].size if len(shapes) > 1 else 0))
        return cost + joined, Shape(joined)
    if name == "split":
        return cost + shapes[0].size, Shape(shapes[0].size, Shape(shapes[0].size))
    if name in ("matches", "find", "findAll"):
        return cost + sizes[0] * max(sizes[-1], 1), Shape(sizes[0], Shape(sizes[0]))
    if name in _SIZE_PRESERVING:
        return cost + sum(sizes), Shape(sum(sizes))
    # Comparisons, scans and everything else: linear in the largest operand, as cel-go counts them.
    return cost + max(sizes) // 10, _SCALAR


def _estimate_comprehension(node: Node, scope: Mapping[str, Shape]) -> tuple[int, Shape]:
    range_cost, range_shape = _estimate(node.parts.get("range", Node("list")), scope)
    iterations = range_shape.size
    init_cost, init_shape = _estimate(node.parts.get("init", Node("const")), scope)
    inner = dict(scope)
    for variable in node.variables:
        inner[variable] = range_shape.element or _SCALAR
    inner[node.accumulator] = init_shape
    _, first_step = _estimate(node.parts.get("step", Node("const")), inner)
    # An accumulator that grows each iteration (map, filter) ends ``iterations`` times larger.
    growth = max(first_step.size - init_shape.size, 0)
    inner[node.accumulator] = Shape(
        init_shape.size + iterations * growth, _merge(init_shape.element, first_step.element)
    )
    step_cost, _ = _estimate(node.parts.get("step", Node("const")), inner)
    condition_cost, _ = _estimate(node.parts.get("condition", Node("const")), inner)
    result_cost, result_shape = _estimate(node.parts.get("result", Node("const")), inner)
    return range_cost + init_cost + iterations * (step_cost + condition_cost) + result_cost, result_shape


# --- Compiling one selector -------------------------------------------------------------------


class CompileError(ValueError):
    """A selector the scheduler would not run (or that could run away here); one line."""


# What Kubernetes' "stored expressions" CEL environment, which the scheduler compiles selectors
# in, declares beyond what is evaluated here (k8s.io/apiserver@v0.35.4 pkg/cel/environment/
# base.go: library.URLs, Regex, Lists, IP, CIDR, Format, ext.Sets, TwoVarComprehensions, and
# CrossTypeNumericComparisons). A selector that uses one compiles on the API server and runs in
# the scheduler: here it selects nothing (fail closed), and its message says that is this
# evaluator's limit, not an error in the class. Each name with the form it is called in there
# (``member``: ``x.name(``; ``global``: ``name(``; ``namespace``: ``name.f(``), so a bare
# identifier or a call of another form (``max > 3``, ``min(1, 2)``) stays a compile error.
_MEMBER, _GLOBAL, _NAMESPACE = r"\.\s*{}\s*\(", r"(?<![\w.]){}\s*\(", r"(?<![\w.]){}\s*\.\s*\w+\s*\("
KUBERNETES_CEL_NOT_EVALUATED: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("find", "findAll"), ("the regex library", _MEMBER)),
    **dict.fromkeys(("isSorted", "sum", "min", "max", "indexOf", "lastIndexOf"), ("the lists library", _MEMBER)),
    "sets": ("the sets extension", _NAMESPACE),
    **dict.fromkeys(("ip", "isIP"), ("the IP library", _GLOBAL)),
    **dict.fromkeys(
        (
            "family",
            "isUnspecified",
            "isLoopback",
            "isLinkLocalMulticast",
            "isLinkLocalUnicast",
            "isGlobalUnicast",
            "isCanonical",
        ),
        ("the IP library", _MEMBER),
    ),
    **dict.fromkeys(("cidr", "isCIDR"), ("the CIDR library", _GLOBAL)),
    **dict.fromkeys(("containsIP", "containsCIDR", "masked", "prefixLength"), ("the CIDR library", _MEMBER)),
    **dict.fromkeys(("url", "isURL"), ("the URL library", _GLOBAL)),
    **dict.fromkeys(
        ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery"), ("the URL library", _MEMBER)
    ),
    "format": ("the format library", _NAMESPACE),
    "validate": ("the format library", _MEMBER),
    **dict.fromkeys(
        ("transformList", "transformMap", "transformMapEntry", "existsOne"), ("two-variable comprehensions", _MEMBER)
    ),
}
# Overloads the lists library adds to a name the strings extension declares for strings.
_LIST_OVERLOADS = {"indexOf", "lastIndexOf"}
_UNDECLARED = re.compile(r"undeclared reference to '([\w.]+)'")
_UNCHECKED_OVERLOAD = re.compile(r"no matching overload for '([^']+)' applied to '\((.*)\)'")
# all(k, v, ...) and exists(k, v, ...): cel-cpp's checker reads them as calls naming an
# undeclared k (or v); the names are the macro's own first two arguments.
_TWO_VARIABLE_MACRO = re.compile(r"\.\s*(?:all|exists|existsOne|exists_one)\s*\(\s*(\w+)\s*,\s*(\w+)\s*,")
_TWO_VARIABLE_MACRO_NAMES = {"all", "exists", "existsOne", "exists_one"}
_NUMBERS = {"int", "uint", "double"}
_ERROR_LINE = re.compile(r"ERROR: <input>:(\d+:\d+: .*)")


def _not_evaluated_anywhere_here(expression: str, error: Exception) -> str | None:
    """The part of Kubernetes' CEL a selector uses that is evaluated nowhere here, when every
    error the checker reports comes from such a part; None when any is a compile error of its
    own (a typo beside a two-variable comprehension is a typo)."""
    lines = _ERROR_LINE.findall(str(error)) or [_first_line_of(error)]
    found = [_not_evaluated_here(expression, line) for line in lines]
    return found[0] if all(found) else None


_COMPARISONS = {"_<_", "_<=_", "_>_", "_>=_"}


def _not_evaluated_here(expression: str, message: str) -> str | None:
    """Which part of Kubernetes' CEL a compile error names, if it names one evaluated nowhere
    here, called as Kubernetes' CEL calls it: then the class is valid to the API server and the
    scheduler. None for anything else (a typo, a wrong operand): a compile error."""
    if (undeclared := _UNDECLARED.search(message)) is not None:
        name = undeclared.group(1)
        macros = _TWO_VARIABLE_MACRO.findall(expression)
        if any(name in pair for pair in macros) or (macros and name in _TWO_VARIABLE_MACRO_NAMES):
            return "two-variable comprehensions"
        known = KUBERNETES_CEL_NOT_EVALUATED.get(name)
        if known is not None and re.search(known[1].format(re.escape(name)), expression):
            return known[0]
        # A namespace's function (``contains`` of ``sets.contains(``) is reported apart from it.
        for namespace, (library, form) in KUBERNETES_CEL_NOT_EVALUATED.items():
            if form == _NAMESPACE and re.search(rf"(?<![\w.]){namespace}\s*\.\s*{re.escape(name)}\s*\(", expression):
                return library
        return None
    if (overload := _UNCHECKED_OVERLOAD.search(message)) is not None:
        name, arguments = overload.group(1), [a.strip() for a in overload.group(2).split(",")]
        if name in _COMPARISONS and set(arguments) <= _NUMBERS and "double" in arguments and len(set(arguments)) == 2:
            return "cross-type numeric comparisons"
        if name in _LIST_OVERLOADS and arguments[0].startswith("list("):
            return KUBERNETES_CEL_NOT_EVALUATED[name][0]
    return None


@dataclass(frozen=True, eq=False)
class Selector:
    """One compiled CEL selector."""

    expression: str
    program: Any
    references: References
    estimated_cost: int


def _first_line_of(error: Exception) -> str:
    lines = str(error).splitlines() or [type(error).__name__]
    first = lines[0]
    for prefix in ("INVALID_ARGUMENT: ", "CANCELLED: ", "ERROR: "):
        first = first.removeprefix(prefix)
    return re.sub(r"\s*\[[A-Z_]+\]$", "", first.removeprefix("<input>:"))


@functools.lru_cache(maxsize=256)
def compile_selector(expression: str, max_cost: int = CEL_SELECTOR_EXPRESSION_MAX_COST) -> Selector:
    """Compile and check one selector, or raise CompileError saying why not (cached: the same
    classes are compiled again whenever a DeviceClass is listed)."""
    if not isinstance(expression, str):
        raise CompileError("the expression is not a string")
    if len(expression) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
        raise CompileError(f"expression longer than {CEL_SELECTOR_EXPRESSION_MAX_LENGTH} characters")
    try:
        program = base_environment().compile(expression)
    except RuntimeError:
        # Not without the extensions: with them, or the error is theirs (what the scheduler,
        # which has them, would say).
        try:
            program = environment().compile(expression)
        except RuntimeError as error:
            said = one_line(_first_line_of(error))
            if (library := _not_evaluated_anywhere_here(expression, error)) is not None:
                raise CompileError(
                    f"uses {library} of Kubernetes' CEL, which fabriccap does not evaluate"
                    f" (the scheduler does, if the class is valid): {said}"
                ) from None
            raise CompileError(f"compile error: {said}") from None
    result = program.return_type()
    if result not in (cel.Type.BOOL, cel.Type.DYN):
        raise CompileError(f"must evaluate to bool, not {one_line(result.name().lower(), 40)}")
    try:
        root = checked_ast(program)
        cost = estimate_cost(root)
    except (ValueError, IndexError, RecursionError):
        raise CompileError("the checked expression cannot be analysed") from None
    if cost > max_cost:
        raise CompileError(f"too complex: estimated cost {cost} exceeds the limit {max_cost}")
    return Selector(expression, program, references(root), cost)


# --- The ``device`` variable ----------------------------------------------------------------------


class DeviceConversionError(ValueError):
    """The device cannot be given to CEL at all (the scheduler fails every selector on it)."""


_PLAIN_KINDS = frozenset({"string", "int", "bool"})
_KNOWN_KINDS = frozenset({"string", "int", "bool", "version", "strings", "ints", "bools", "versions"})


def _attribute_value(name: str, attribute: Any) -> Any:
    """One v1 DeviceAttribute as CEL sees it. The list forms are Kubernetes 1.36's (alpha
    DRAListTypeAttributes)."""
    if isinstance(attribute, Mapping):
        try:
            if "string" in attribute:
                return str(attribute["string"])
            if "int" in attribute:
                value = attribute["int"]
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TypeError(f"int value {one_line(repr(value), 40)} is not an integer")
                return value
            if "bool" in attribute:
                value = attribute["bool"]
                if not isinstance(value, bool):
                    raise TypeError(f"bool value {one_line(repr(value), 40)} is not a boolean")
                return value
            if "version" in attribute:
                return semver_value(str(attribute["version"]))
            if "strings" in attribute:
                return [str(value) for value in attribute["strings"]]
            if "ints" in attribute:
                return [int(value) for value in attribute["ints"]]
            if "bools" in attribute:
                return [bool(value) for value in attribute["bools"]]
            if "versions" in attribute:
                return [semver_value(str(value)) for value in attribute["versions"]]
        except (InvalidValueError, TypeError, ValueError) as error:
            raise DeviceConversionError(one_line(f"attribute {name}: {error}")) from None
    raise DeviceConversionError(one_line(f"attribute {name}: unsupported attribute value"))


def _capacity_value(name: str, capacity: Any) -> Any:
    value = capacity.get("value") if isinstance(capacity, Mapping) else None
    try:
        return _quantity_of(str(value)) if value is not None else None
    except InvalidValueError as error:
        raise DeviceConversionError(one_line(f"capacity {name}: {error}")) from None


def conversion_problem(device: Mapping[str, Any]) -> str | None:
    """Why the device cannot be given to CEL, without building it: a version, a quantity or an
    attribute value Kubernetes would not convert. An API server validates these on write, so
    only a snapshot or a hand-made object has one; the scheduler fails the whole device."""
    attributes = device.get("attributes")
    for name, attribute in attributes.items() if isinstance(attributes, Mapping) else ():
        # Nearly every attribute is one plain value: nothing to parse. (An exact type test
        # first: the ABC check costs more than the rest, on 340,000 devices at a start.)
        if type(attribute) is dict and len(attribute) == 1 and next(iter(attribute)) in _PLAIN_KINDS:
            continue
        if isinstance(attribute, Mapping) and len(attribute) == 1 and not _PLAIN_KINDS.isdisjoint(attribute):
            continue
        try:
            _attribute_value(name, attribute)
        except DeviceConversionError as error:
            return str(error)
    capacity = device.get("capacity")
    for name, entry in capacity.items() if isinstance(capacity, Mapping) else ():
        try:
            if _capacity_value(name, entry) is None:
                return one_line(f"capacity {name}: no value")
        except DeviceConversionError as error:
            return str(error)
    return None


def _split_name(name: str, driver: str) -> tuple[str, str]:
    # A name without a domain is in the driver's (parseQualifiedName in cel/compile.go).
    domain, slash, identifier = name.partition("/")
    return (domain, identifier) if slash else (driver, name)


def device_variable(driver: str, device: Mapping[str, Any], selector: Selector) -> dict[str, Any]:
    """The ``device`` variable for one selector: the v1 Device as the scheduler converts it.

    A selector that only does named reads gets only those entries converted (the others cannot
    change its outcome); a device that cannot be converted fails, as in the scheduler.
    """
    refs = selector.references
    attributes: dict[str, dict[str, Any]] = {}
    capacity: dict[str, dict[str, Any]] = {}
    raw_attributes = device.get("attributes")
    raw_capacity = device.get("capacity")
    raw_attributes = raw_attributes if isinstance(raw_attributes, Mapping) else {}
    raw_capacity = raw_capacity if isinstance(raw_capacity, Mapping) else {}
    if refs.named_reads_only:
        problem = conversion_problem(device)
        if problem is not None:
            raise DeviceConversionError(problem)
        for read in refs.reads:
            entries = raw_attributes if read.field == "attributes" else raw_capacity
            entry = entries.get(f"{read.domain}/{read.name}")
            if entry is None and read.domain == driver:
                entry = entries.get(read.name)
            if entry is None:
                continue
            if read.field == "attributes":
                attributes.setdefault(read.domain, {})[read.name] = _attribute_value(read.name, entry)
            else:
                capacity.setdefault(read.domain, {})[read.name] = _capacity_value(read.name, entry)
    else:
        for name, attribute in raw_attributes.items():
            domain, identifier = _split_name(str(name), driver)
            attributes.setdefault(domain, {})[identifier] = _attribute_value(str(name), attribute)
        for name, entry in raw_capacity.items():
            domain, identifier = _split_name(str(name), driver)
            value = _capacity_value(str(name), entry)
            if value is None:
                raise DeviceConversionError(one_line(f"capacity {name}: no value"))
            capacity.setdefault(domain, {})[identifier] = value
    # The scheduler answers an absent domain with an empty map, so the lookup inside it is what
    # fails ("no such key: model"); a map given to cel-cpp cannot default, so the domains the
    # expression names are added empty. Difference: `"x" in device.attributes` then reads true.
    for domain in refs.attribute_domains:
        attributes.setdefault(domain, {})
    for domain in refs.capacity_domains:
        capacity.setdefault(domain, {})
    return {
        DEVICE_DRIVER: driver,
        DEVICE_MULTIPLE_ALLOCATIONS: device.get(MULTIPLE_ALLOCATIONS_FIELD) is True,
        DEVICE_ATTRIBUTES: attributes,
        DEVICE_CAPACITY: capacity,
    }


# --- Evaluating -------------------------------------------------------------------------------


class Verdict(enum.Enum):
    SELECTED = "selected"
    NOT_SELECTED = "not selected"
    ERROR = "error"  # not selected; the scheduler aborts the pod's scheduling attempt instead


class Outcome(NamedTuple):
    verdict: Verdict
    cause: str | None = None  # one line, for ERROR only

    @property
    def selected(self) -> bool:
        return self.verdict is Verdict.SELECTED


SELECTED = Outcome(Verdict.SELECTED)
NOT_SELECTED = Outcome(Verdict.NOT_SELECTED)

_KEY_NOT_FOUND = re.compile(r'Key not found in map\s*:\s*"?([^"]*)"?')
_NO_OVERLOAD = re.compile(r"No matching overloads found\s*:\s*(.*)")


def error_cause(message: str) -> str:
    """A runtime error as one line that reads like Kubernetes' (``no such key: pciDevice``), so
    one cause is reported once whatever the device."""
    first = message.splitlines()[0] if message else "unknown error"
    if match := _KEY_NOT_FOUND.search(first):
        return one_line(f"no such key: {match.group(1)}")
    if "Iteration budget exceeded" in first:
        return ITERATION_BUDGET_CAUSE
    if match := _NO_OVERLOAD.search(first):
        return one_line(f"no such overload: {match.group(1)}")
    for prefix in ("INVALID_ARGUMENT: ", "INTERNAL: ", "NOT_FOUND: ", "UNKNOWN: ", "CANCELLED: "):
        first = first.removeprefix(prefix)
    return one_line(re.sub(r"\s*\[[A-Z_]+\]$", "", first))


def evaluate(selectors: Sequence[Selector], driver: str, device: Mapping[str, Any]) -> Outcome:
    """Whether a class of these selectors selects the device: every one must be true, and the
    first that is false or fails decides (the scheduler's order)."""
    for position, selector in enumerate(selectors):
        try:
            variable = device_variable(driver, device, selector)
        except DeviceConversionError as error:
            return Outcome(Verdict.ERROR, str(error))
        try:
            result = selector.program.eval(data=variable)
        except RuntimeError as error:  # the iteration budget raises instead of returning an error
            return Outcome(Verdict.ERROR, f"selector #{position}: {error_cause(str(error))}")
        kind = result.type()
        if kind == cel.Type.BOOL:
            if result.value() is not True:
                return NOT_SELECTED
            continue
        if kind == cel.Type.ERROR:
            return Outcome(Verdict.ERROR, f"selector #{position}: {error_cause(str(result.value()))}")
        return Outcome(
            Verdict.ERROR, f"selector #{position}: result of type {one_line(kind.name().lower(), 40)} is not a bool"
        )
    return SELECTED


# --- Cache keys ------------------------------------------------------------------------------------


def _frozen(value: Any) -> Hashable:
    if type(value) is dict and len(value) == 1:
        ((key, item),) = value.items()  # an attribute's one typed value: the common case
        if type(item) in (str, int, bool):
            return ((key, item),)
    if isinstance(value, Mapping):
        return tuple(sorted((str(key), _frozen(item)) for key, item in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    return value if isinstance(value, Hashable) else repr(value)


def content_key(driver: str, device: Mapping[str, Any]) -> Hashable:
    """Everything a selector can read of the device: identical devices share one outcome."""
    return (
        driver,
        device.get(MULTIPLE_ALLOCATIONS_FIELD) is True,
        _frozen(device.get("attributes") or {}),
        _frozen(device.get("capacity") or {}),
    )


def projected_key(driver: str, device: Mapping[str, Any], reads: Sequence[Read]) -> Hashable:
    """Only what ``reads`` name (valid when every selector does named reads only): the ENA
    devices of 10,000 nodes, which differ in their MAC and address, share one outcome."""
    # A device that cannot be converted fails every selector, whatever they read.
    values: list[Hashable] = [driver, device.get(MULTIPLE_ALLOCATIONS_FIELD) is True, conversion_problem(device)]
    attributes = device.get("attributes")
    capacity = device.get("capacity")
    for read in reads:
        entries = attributes if read.field == "attributes" else capacity
        if not isinstance(entries, Mapping):
            values.append(None)
            continue
        entry = entries.get(f"{read.domain}/{read.name}")
        if entry is None and read.domain == driver:
            entry = entries.get(read.name)  # unqualified: the driver's domain
        values.append(None if entry is None else _frozen(entry))
    return tuple(values)
