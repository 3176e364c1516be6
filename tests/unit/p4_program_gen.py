"""Random well-typed v1model programs over headers, header unions and stacks, for fuzzing.

:func:`random_program` writes one program from a seed: header types of random layouts (every
header a whole number of bytes), header unions of them, a headers struct holding headers,
header stacks, unions, stacks of unions and a nested struct with a header and a union; a
parser extracting into all of those (``s.next``, ``us.next.member``, union members, a
sub-parser with ``out``/``inout`` arguments that may reject, selects on fields and on
``lookahead``, stack loops); an ingress of random statements: assignments and
compound assignments to fields, slices and stack elements at constant and run-time indices
(some computed by a function with an ``inout`` argument, a side effect), header, union and
stack assignments, ``setValid``/``setInvalid``, ``push_front``/``pop_front``, ``if`` on
validity, comparisons and header/union equality, ``{#}``, ``for`` loops of both forms with
``break``/``continue``, headers with a varbit field (extracted with a size read by ``lookahead``,
assigned, compared, ``sizeInBits``), a nested control applied to the
same headers (its body may ``exit``), calls of actions with ``in``/``out``/``inout`` header, union and
scalar parameters that also name the headers directly (aliasing), ``exit``, a table; the
deparser emits everything. ``Gen.packet`` gives frames of whole headers' sizes, some
truncated.

Run many from the command line (the unit suite runs a few)::

    python -m tests.unit.p4_program_gen --programs 10000 --packets 8 --seed 1
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field

# -- types -------------------------------------------------------------------------------------


@dataclass
class Header:
    name: str
    widths: list[int]  # one per field f0, f1, ...; the sum is a multiple of 8

    @property
    def nbytes(self) -> int:
        return sum(self.widths) // 8


@dataclass
class Union:
    name: str
    members: list[Header]  # members m0, m1, ...


@dataclass
class Layout:
    """The headers struct: what each of its fields holds."""

    headers: dict[str, Header] = field(default_factory=dict)  # hdr.<name>
    stacks: dict[str, tuple[Header, int]] = field(default_factory=dict)
    unions: dict[str, Union] = field(default_factory=dict)
    ustacks: dict[str, tuple[Union, int]] = field(default_factory=dict)
    nested: tuple[Header, Union] | None = None  # hdr.n.h, hdr.n.u
    varbits: dict[str, int] = field(default_factory=dict)  # hdr.<name>: V_t, varbit<max>


WIDTHS = [1, 2, 3, 4, 5, 7, 8, 8, 8, 9, 12, 16, 16, 24, 32, 48]
META = {"m0": 8, "m1": 8, "m2": 16, "m3": 32}


def _header(rng: random.Random, name: str) -> Header:
    widths = [rng.choice(WIDTHS) for _ in range(rng.randint(1, 4))]
    if sum(widths) % 8:
        widths.append(8 - sum(widths) % 8)
    return Header(name, widths)


class Gen:
    """One random program; ``text()`` is its source."""

    def __init__(self, seed: int) -> None:
        self.rng = rng = random.Random(seed)
        self.types = [_header(rng, f"H{i}_t") for i in range(rng.randint(2, 4))]
        self.utypes: list[Union] = []
        for i in range(rng.randint(1, 2)):
            k = min(len(self.types), rng.randint(2, 3))
            self.utypes.append(Union(f"U{i}_u", rng.sample(self.types, k)))
        lay = Layout()
        for i in range(rng.randint(1, 3)):
            lay.headers[f"h{i}"] = rng.choice(self.types)
        for i in range(rng.randint(0, 2)):
            lay.stacks[f"s{i}"] = (rng.choice(self.types), rng.randint(1, 4))
        for i in range(rng.randint(0, 2)):
            lay.unions[f"u{i}"] = rng.choice(self.utypes)
        for i in range(rng.randint(0, 2)):
            lay.ustacks[f"us{i}"] = (rng.choice(self.utypes), rng.randint(1, 3))
        if rng.random() < 0.6:
            lay.nested = (rng.choice(self.types), rng.choice(self.utypes))
        # headers with a varbit field (V_t: a length byte, then varbit<vmax>)
        self.vmax = rng.choice([16, 64, 2040])
        for i in range(rng.choice([0, 0, 1, 2])):
            lay.varbits[f"v{i}"] = self.vmax
        self.lay = lay
        self.actions: list[str] = []
        self.action_sigs: list[tuple[str, list[tuple[str, str, str]]]] = []
        self.tmp = 0

    # -- places ----------------------------------------------------------------------------

    def index(self, size: int, runtime_ok: bool = True) -> str:
        rng = self.rng
        if not runtime_ok or rng.random() < 0.6:
            return str(rng.randrange(size))
        choice = rng.randrange(3)
        if choice == 0:
            return f"meta.{rng.choice(['m0', 'm1'])}"
        if choice == 1:
            return f"(bump(meta.{rng.choice(['m0', 'm1'])}) & 8w{max(1, size)})"
        return f"(bit<8>){self.scalar_read(8, depth=2)}"

    def header_places(self, runtime_ok: bool = True) -> list[tuple[str, Header]]:
        """Header l-values: (code, type)."""
        lay = self.lay
        out = [(f"hdr.{n}", t) for n, t in lay.headers.items()]
        for n, (t, size) in lay.stacks.items():
            out.append((f"hdr.{n}[{self.index(size, runtime_ok)}]", t))
        for n, u in lay.unions.items():
            out += [(f"hdr.{n}.m{i}", t) for i, t in enumerate(u.members)]
        for n, (u, size) in lay.ustacks.items():
            idx = self.index(size, runtime_ok)
            out += [(f"hdr.{n}[{idx}].m{i}", t) for i, t in enumerate(u.members)]
        if lay.nested is not None:
            h, u = lay.nested
            out.append(("hdr.n.h", h))
            out += [(f"hdr.n.u.m{i}", t) for i, t in enumerate(u.members)]
        return out

    def union_places(self) -> list[tuple[str, Union]]:
        lay = self.lay
        out = [(f"hdr.{n}", u) for n, u in lay.unions.items()]
        for n, (u, size) in lay.ustacks.items():
            out.append((f"hdr.{n}[{self.index(size)}]", u))
        if lay.nested is not None:
            out.append(("hdr.n.u", lay.nested[1]))
        return out

    def scalar_place(self) -> tuple[str, int]:
        """A scalar l-value: (code, width)."""
        rng = self.rng
        if rng.random() < 0.25:
            n = rng.choice(list(META))
            return f"meta.{n}", META[n]
        code, t = rng.choice(self.header_places())
        i = rng.randrange(len(t.widths))
        w = t.widths[i]
        if w > 1 and rng.random() < 0.2:
            hi = rng.randrange(1, w)
            lo = rng.randrange(0, hi + 1)
            return f"{code}.f{i}[{hi}:{lo}]", hi - lo + 1
        return f"{code}.f{i}", w

    # -- expressions -----------------------------------------------------------------------

    def scalar_read(self, w: int, depth: int = 0) -> str:
        rng = self.rng
        r = rng.random()
        if depth > 2 or r < 0.3:
            return f"{w}w{rng.randrange(1 << w)}"
        if r < 0.65:
            code, pw = self.scalar_place()
            return code if pw == w else f"((bit<{w}>){code})"
        if r < 0.8:
            op = rng.choice(["+", "-", "&", "|", "^", "|+|", "|-|"])
            a, b = self.scalar_read(w, depth + 1), self.scalar_read(w, depth + 1)
            return f"({a} {op} {b})"
        if r < 0.85:
            return f"({self.scalar_read(w, depth + 1)} << {rng.randrange(w + 2)})"
        if r < 0.92:
            c = self.cond(depth + 1)
            return f"({c} ? {self.scalar_read(w, depth + 1)} : {self.scalar_read(w, depth + 1)})"
        m = rng.choice(["m0", "m1"])
        return f"((bit<{w}>)bump(meta.{m}))"

    def cond(self, depth: int = 0) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.35:
            code, _t = rng.choice(self.header_places())
            return f"{code}.isValid()"
        if r < 0.45 and self.union_places():
            code, _u = rng.choice(self.union_places())
            return f"{code}.isValid()"
        if r < 0.8 or depth > 2:
            w = rng.choice([1, 8, 16])
            op = rng.choice(["==", "!=", "<", ">=", ">"])
            return f"({self.scalar_read(w, depth + 1)} {op} {self.scalar_read(w, depth + 1)})"
        if r < 0.85:
            if rng.random() < 0.5 and self.union_places():
                code, u = rng.choice(self.union_places())
                same = [c for c, v in self.union_places() if v is u]
            else:
                code, t = rng.choice(self.header_places())
                same = [c for c, v in self.header_places() if v is t]
            other = rng.choice(same) if rng.random() < 0.8 else "{#}"
            return f"({code} {rng.choice(['==', '!='])} {other})"
        if r < 0.9:
            return f"!{self.cond(depth + 1)}"
        op = rng.choice(["&&", "||"])
        return f"({self.cond(depth + 1)} {op} {self.cond(depth + 1)})"

    # -- statements ------------------------------------------------------------------------

    def stmt(self, depth: int, in_action: bool, params: list[tuple[str, str, str]]) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.25:
            code, w = self.scalar_place()
            return f"{code} = {self.scalar_read(w)};"
        if r < 0.35:
            code, w = self.scalar_place()
            op = rng.choice(["+=", "-=", "&=", "|=", "^=", "<<=", ">>="])
            rhs = str(rng.randrange(w + 1)) if op in ("<<=", ">>=") else self.scalar_read(w)
            return f"{code} {op} {rhs};"
        if r < 0.45:
            code, t = rng.choice(self.header_places())
            return f"{code}.{rng.choice(['setValid', 'setInvalid'])}();"
        if r < 0.55:
            code, t = rng.choice(self.header_places())
            same = [c for c, u in self.header_places() if u is t]
            if rng.random() < 0.3:
                vals = ", ".join(f"{w}w{rng.randrange(1 << w)}" for w in t.widths)
                return f"{code} = {{ {vals} }};"
            if rng.random() < 0.1:
                return f"{code} = {{#}};"
            return f"{code} = {rng.choice(same)};"
        if r < 0.6 and self.union_places():
            code, u = rng.choice(self.union_places())
            same = [c for c, v in self.union_places() if v is u]
            if rng.random() < 0.1:
                return f"{code} = ({u.name}){{#}};"
            return f"{code} = {rng.choice(same)};"
        if r < 0.66 and (self.lay.stacks or self.lay.ustacks):
            stacks = list(self.lay.stacks.items()) + list(self.lay.ustacks.items())
            n, (_t, size) = rng.choice(stacks)
            if rng.random() < 0.2:
                same = [m for m, (u, s) in stacks if u is _t and s == size]
                return f"hdr.{n} = hdr.{rng.choice(same)};"
            op = rng.choice(["push_front", "pop_front"])
            return f"hdr.{n}.{op}({rng.randint(1, size + 1)});"
        if r < 0.78 and depth < 3:
            then = self.block(depth + 1, in_action, params)
            other = self.block(depth + 1, in_action, params) if rng.random() < 0.5 else ""
            return f"if ({self.cond()}) {then}" + (f" else {other}" if other else "")
        if r < 0.9 and not in_action and self.action_sigs:
            name, sig = rng.choice(self.action_sigs)
            return f"{name}({', '.join(self.arg(d, k, t) for d, k, t in sig)});"
        if r < 0.93:
            return "exit;"
        if r < 0.965:
            extra = self.loop_or_varbit(depth, in_action, params)
            if extra is not None:
                return extra
        if r < 0.96 and params:
            d, k, n = rng.choice(params)
            if k.startswith("bit") and d != "in":
                w = int(k[4:-1])
                return f"{n} = {n} + {w}w1;"
        return f"meta.m0 = bump(meta.{rng.choice(['m0', 'm1'])});"

    def loop_or_varbit(
        self, depth: int, in_action: bool, params: list[tuple[str, str, str]]
    ) -> str | None:
        """A for loop (both forms, with break/continue) or a statement over varbit headers."""
        rng = self.rng
        if self.lay.varbits and rng.random() < 0.5:
            return self.varbit_stmt(depth, in_action, params)
        if depth >= 2:
            return None
        self.tmp += 1
        i = f"i{self.tmp}"
        body = self.block(depth + 1, in_action, params)
        if rng.random() < 0.5:
            return f"for (bit<8> {i} in 8w0 .. 8w{rng.randint(0, 3)}) {body}"
        jump = rng.choice(["break", "continue"])
        body = f"{{ if ({self.cond(depth + 1)}) {{ {jump}; }} {body[1:]}"
        bound = "(meta.m0 & 8w3)"  # the body may change meta.m0; i still stops by 3
        return f"for (bit<8> {i} = 8w0; {i} < {bound}; {i} = {i} + 8w1) {body}"

    def varbit_stmt(self, depth: int, in_action: bool, params: list[tuple[str, str, str]]) -> str:
        """A statement over the varbit headers (there is at least one)."""
        rng = self.rng
        names = list(self.lay.varbits)
        a, b = rng.choice(names), rng.choice(names)
        r = rng.random()
        if r < 0.2:
            return f"hdr.{a} = hdr.{b};"
        if r < 0.4:
            return f"hdr.{a}.opt = hdr.{b}.opt;"
        if r < 0.55:
            return f"hdr.{a}.{rng.choice(['setValid', 'setInvalid'])}();"
        if r < 0.7 or depth >= 3:
            return f"meta.m3 = hdr.{a}.sizeInBits();"
        op = rng.choice(["==", "!="])
        then = self.block(depth + 1, in_action, params)
        return f"if (hdr.{a}.opt {op} hdr.{b}.opt) {then}"

    def arg(self, direction: str, kind: str, type_name: str) -> str:
        rng = self.rng
        if kind == "header":
            cands = [c for c, t in self.header_places() if t.name == type_name]
            return rng.choice(cands)
        if kind == "union":
            return rng.choice([c for c, u in self.union_places() if u.name == type_name])
        w = int(kind[4:-1])
        if direction == "in":
            return self.scalar_read(w)
        for _ in range(20):
            code, pw = self.scalar_place()
            if pw == w:
                return code
        return "meta.m0" if w == 8 else "meta.m2" if w == 16 else "meta.m3"

    def block(self, depth: int, in_action: bool, params: list[tuple[str, str, str]]) -> str:
        n = self.rng.randint(1, 3)
        body = " ".join(self.stmt(depth, in_action, params) for _ in range(n))
        return "{ " + body + " }"

    def make_actions(self) -> None:
        rng = self.rng
        for k in range(rng.randint(1, 3)):
            sig: list[tuple[str, str, str]] = []  # (direction, kind, type name)
            params: list[tuple[str, str, str]] = []  # (direction, kind, parameter name)
            decls: list[str] = []
            for j in range(rng.randint(0, 3)):
                d = rng.choice(["in", "out", "inout", "inout"])
                r = rng.random()
                if r < 0.4:
                    t = rng.choice(self.types)
                    if not [c for c, u in self.header_places(False) if u is t]:
                        continue
                    kind, tname = "header", t.name
                elif r < 0.55 and self.union_places():
                    kind, tname = "union", rng.choice([u for _c, u in self.union_places()]).name
                else:
                    kind = tname = f"bit<{rng.choice([8, 16])}>"
                sig.append((d, kind, tname))
                params.append((d, kind, f"p{j}"))
                decls.append(f"{d} {tname} p{j}")
            body = self.block(1, True, params)
            # use the parameters: scalars updated, headers' validity read and changed
            uses = []
            for d, kind, n in params:
                if d == "in":
                    continue
                if kind.startswith("bit"):
                    uses.append(f"{n} = {n} |+| {kind[4:-1]}w3;")
                elif kind == "header":
                    uses.append(f"if ({n}.isValid()) {{ {n}.setInvalid(); }}")
            body = body[:-1] + " ".join(uses) + " }"
            self.actions.append(f"    action a{k}({', '.join(decls)}) {body}")
            self.action_sigs.append((f"a{k}", sig))

    # -- the program -----------------------------------------------------------------------

    def parser(self) -> str:
        rng = self.rng
        targets = [c for c, _t in self.header_places(False)]
        for n, (u, _size) in self.lay.ustacks.items():
            targets += [f"hdr.{n}.next.m{i}" for i in range(len(u.members))]
        for n in self.lay.stacks:
            targets += [f"hdr.{n}.next"] * 2
        targets += [f"VB:{n}" for n in self.lay.varbits]
        rng.shuffle(targets)
        states = []
        nstates = min(len(targets), rng.randint(1, 5))
        for i in range(nstates):
            tgt = targets[i]
            nxt = f"st{i + 1}" if i + 1 < nstates else "accept"
            if tgt.endswith(".next") and rng.random() < 0.5:
                loop = f"st{i}"
                trans = (
                    f"transition select(pkt.lookahead<bit<8>>()[0:0]) "
                    f"{{ 1w1: {loop}; default: {nxt}; }}"
                )
            elif rng.random() < 0.4:
                code, w = rng.choice([(c, t.widths[0]) for c, t in self.header_places(False)])
                v = rng.randrange(1 << w)
                trans = (
                    f"transition select({code}.f0) "
                    f"{{ {w}w{v}: accept; {w}w{v} &&& {w}w{v}: {nxt}; default: {nxt}; }}"
                )
            else:
                trans = f"transition {nxt};"
            if tgt.startswith("VB:"):
                # size from the header's own length byte: in bytes (sometimes in bits, which
                # is ParserInvalidArgument unless a multiple of 8); above vmax: HeaderTooShort
                unit = " * 8" if rng.random() < 0.8 else ""
                size = f"(bit<32>) pkt.lookahead<bit<8>>(){unit}"
                states.append(f"    state st{i} {{ pkt.extract(hdr.{tgt[3:]}, {size}); {trans} }}")
                continue
            states.append(f"    state st{i} {{ pkt.extract({tgt}); {trans} }}")
        # a sub-parser extracting into a header given as an out argument (it may reject)
        subs = [(c, t) for c, t in self.header_places(False) if t is self.types[0]]
        if subs and rng.random() < 0.5:
            code, _t = rng.choice(subs)
            states.insert(
                0, f"    state sub {{ subp.apply(pkt, {code}, meta.m1); transition st0; }}"
            )
            start = "    state start { transition sub; }"
        else:
            start = "    state start { transition st0; }"
        return "\n".join(["    SubP() subp;", start, *states])

    def text(self) -> str:
        rng = self.rng
        out = ["#include <core.p4>", "#include <v1model.p4>"]
        for t in self.types:
            layout = " ".join(f"bit<{w}> f{i};" for i, w in enumerate(t.widths))
            out.append(f"header {t.name} {{ {layout} }}")
        for u in self.utypes:
            members = " ".join(f"{t.name} m{i};" for i, t in enumerate(u.members))
            out.append(f"header_union {u.name} {{ {members} }}")
        lay = self.lay
        if lay.varbits:
            out.append(f"header V_t {{ bit<8> len; varbit<{self.vmax}> opt; }}")
        if lay.nested is not None:
            out.append(f"struct n_t {{ {lay.nested[0].name} h; {lay.nested[1].name} u; }}")
        fields = [f"{t.name} {n};" for n, t in lay.headers.items()]
        fields += [f"{t.name}[{s}] {n};" for n, (t, s) in lay.stacks.items()]
        fields += [f"{u.name} {n};" for n, u in lay.unions.items()]
        fields += [f"{u.name}[{s}] {n};" for n, (u, s) in lay.ustacks.items()]
        if lay.nested is not None:
            fields.append("n_t n;")
        fields += [f"V_t {n};" for n in lay.varbits]
        out.append("struct headers_t { " + " ".join(fields) + " }")
        out.append("struct meta_t { " + " ".join(f"bit<{w}> {n};" for n, w in META.items()) + " }")
        out.append("bit<8> bump(inout bit<8> x) { x = x + 8w1; return x; }")
        t0 = self.types[0].name
        out.append(
            f"parser SubP(packet_in pkt, out {t0} x, inout bit<8> c) {{ state start {{ "
            "c = c + 8w1; pkt.extract(x); c = c + 8w1; transition accept; } }"
        )
        out.append(
            "parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, "
            "inout standard_metadata_t sm) {"
        )
        out.append(self.parser())
        out.append("}")
        self.make_actions()
        # a nested control over the same headers and metadata (its body may exit)
        sub = " ".join(self.stmt(0, True, []) for _ in range(rng.randint(1, 4)))
        out.append(f"control Sub(inout headers_t hdr, inout meta_t meta) {{ apply {{ {sub} }} }}")
        out.append(
            "control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {"
        )
        out.append("    Sub() sub;")
        out.extend(self.actions)
        simple = [n for n, sig in self.action_sigs if not sig]
        if simple:
            key, _w = self.scalar_place()
            acts = " ".join(f"{n};" for n in simple)
            out.append(
                f"    table t {{ key = {{ {key}: exact; }} actions = {{ {acts} NoAction; }} "
                f"default_action = {rng.choice(simple)}(); }}"
            )
        body = ["sm.egress_spec = 9w1;"]
        if simple and rng.random() < 0.7:
            body.append("t.apply();")
        body += [self.stmt(0, False, []) for _ in range(rng.randint(2, 8))]
        if lay.varbits:
            body += [self.varbit_stmt(0, False, []) for _ in range(rng.randint(1, 3))]
        body.insert(rng.randrange(1, len(body) + 1), "sub.apply(hdr, meta);")
        out.append("    apply { " + " ".join(body) + " }")
        out.append("}")
        out.append(
            "control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) "
            "{ apply { } }"
        )
        out.append("control VC(inout headers_t hdr, inout meta_t meta) { apply { } }")
        out.append("control CC(inout headers_t hdr, inout meta_t meta) { apply { } }")
        out.append("control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }")
        out.append("V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;")
        return "\n".join(out) + "\n"

    def packet(self) -> bytes:
        rng = self.rng
        sizes = [t.nbytes for t in self.types]
        n = sum(rng.choice(sizes) for _ in range(rng.randint(0, 8)))
        data = bytearray(rng.randbytes(n + rng.randint(0, 6)))
        if self.lay.varbits and rng.random() < 0.5:
            # a well-formed varbit header (length byte, that many bytes) somewhere
            k = rng.randint(0, 10)
            at = rng.randint(0, len(data))
            data[at:at] = bytes([k]) + rng.randbytes(k)
        r = rng.random()
        if r < 0.15 and data:
            del data[rng.randrange(len(data)) :]
        return bytes(data)


def random_program(seed: int) -> Gen:
    """The generator of the program for ``seed`` (``.text()`` the source, ``.packet()`` frames)."""
    return Gen(seed)


# -- running them ------------------------------------------------------------------------------


@dataclass
class Outcome:
    programs: int = 0
    packets: int = 0
    unsupported: int = 0
    failures: list[tuple[int, str]] = field(default_factory=list)  # (seed, what)


def run(seeds: range, packets: int) -> Outcome:
    """Compile and run every program of ``seeds`` on ``packets`` frames each. Only a clear
    "not supported" error may stop a program; any other exception is a failure."""
    from switch.compile import compile_source
    from switch.errors import UnsupportedError
    from switch.pipeline.v1model import V1Switch

    res = Outcome()
    for seed in seeds:
        g = random_program(seed)
        src = g.text()
        try:
            prog = compile_source(src, f"fuzz{seed}.p4")
        except UnsupportedError:
            res.unsupported += 1
            continue
        except Exception as e:  # noqa: BLE001 - every other error is what we look for
            res.failures.append((seed, f"compile: {type(e).__name__}: {e}"))
            continue
        res.programs += 1
        sw = V1Switch(prog, seed=seed)
        for _ in range(packets):
            frame = g.packet()
            try:
                sw.process(0, frame)
            except Exception as e:  # noqa: BLE001
                res.failures.append((seed, f"run {frame.hex()}: {type(e).__name__}: {e}"))
                break
            res.packets += 1
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=1000)
    ap.add_argument("--packets", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--show", type=int, help="print the program of this seed and exit")
    args = ap.parse_args(argv)
    if args.show is not None:
        print(random_program(args.show).text())
        return 0
    t0 = time.monotonic()
    res = run(range(args.seed, args.seed + args.programs), args.packets)
    dt = time.monotonic() - t0
    print(
        f"{res.programs} programs run, {res.unsupported} refused as not supported, "
        f"{res.packets} packets, {len(res.failures)} failures, {dt:.1f} s"
    )
    for seed, what in res.failures[:20]:
        print(f"  seed {seed}: {what}")
    return 1 if res.failures else 0


if __name__ == "__main__":
    sys.exit(main())
