// copy_in_out.p4 -- the calling convention: call by copy in / copy out (P4-16 "Calling
// convention"), with arguments that alias each other or the callee's own names.
//
// Covers: an action with an inout header argument that also writes the same header through
// the control's parameter (the copy-out of the argument wins); one header passed as two inout
// arguments (each parameter is its own copy; copied back left to right, the last wins); an
// out header argument starts invalid in the callee and comes back invalid; the l-value of an
// out argument (a stack element at a run-time index) is saved before a later argument's side
// effect changes the index; an inout scalar's value is read before a later argument changes
// it; a nested control given the same header twice; a function with an inout header and a
// return value; an extern (hash) whose data argument changes the index of its out argument
// (the l-value is saved first); named arguments evaluated in the order written, with a
// default for the omitted one.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> sel;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> i;
}

header g_t {
    bit<8> x;
}

header flag_t {
    bit<8> f;
}

struct headers_t {
    h_t     h;
    g_t[4]  s;
    flag_t  fl;
    g_t     opt;
}

struct meta_t { }

bit<8> bump(inout bit<8> v) {
    v = v + 1;
    return v;
}

bit<8> swap_ab(inout h_t hh) {
    bit<8> t = hh.a;
    hh.a = hh.b;
    hh.b = t;
    return hh.a;
}

bit<8> pick(in bit<8> a, in bit<8> b, in bit<8> c = 8w7) {
    return a * 8w16 + b + c;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.fl);
        pkt.extract(hdr.opt);
        transition accept;
    }
}

control Pair(inout h_t p, inout h_t q) {
    apply {
        p.a = 0x01;
        q.c = q.a;
    }
}

control MyIngress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    Pair() pair;

    action touch(inout h_t v) {
        hdr.h.a = 0x55;  // the caller's header, not the parameter
        v.b = 0x66;
    }

    action two(inout h_t p, inout h_t q) {
        p.a = 0x01;
        q.c = q.a;       // q is its own copy: p's change is not visible
    }

    action probe(out g_t o, out bit<8> valid) {
        valid = o.isValid() ? 8w1 : 8w0;
    }

    action store(out bit<8> o, in bit<8> v) {
        o = v;
    }

    action accumulate(inout bit<8> acc, in bit<8> d) {
        acc = acc + d;
    }

    apply {
        sm.egress_spec = 1;
        if (hdr.h.sel == 1) {
            touch(hdr.h);
        } else if (hdr.h.sel == 2) {
            two(hdr.h, hdr.h);
        } else if (hdr.h.sel == 3) {
            probe(hdr.opt, hdr.fl.f);
        } else if (hdr.h.sel == 4) {
            store(hdr.s[hdr.h.i].x, bump(hdr.h.i));
        } else if (hdr.h.sel == 5) {
            accumulate(hdr.h.a, bump(hdr.h.a));
        } else if (hdr.h.sel == 6) {
            pair.apply(hdr.h, hdr.h);
        } else if (hdr.h.sel == 7) {
            hdr.fl.f = swap_ab(hdr.h);
        } else if (hdr.h.sel == 8) {
            // an extern's out argument: its l-value (index i) is saved first, then the data
            // argument is evaluated (its bump(i) does not move the result's index)
            hash(hdr.s[hdr.h.i & 3].x, HashAlgorithm.identity, 8w0, { bump(hdr.h.i) }, 16w256);
        } else if (hdr.h.sel == 9) {
            // named arguments are evaluated in the order written, a default fills c
            hdr.fl.f = pick(b = bump(hdr.h.i), a = hdr.h.i);
        }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), MyIngress(), MyEgress(), CC(), D()) main;
