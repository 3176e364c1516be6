// enum_typedef_const.p4 -- typedef, const, plain and serializable enums.
//
// Covers: typedef'd field and port types; const declarations (one of them a
// constant-folded expression); a serializable enum `enum bit<8> Op_e` built from
// a header field by a cast and compared against its members; a value that is no
// member (7) matching none of them; casting an enum member back to bit<8>; a
// plain enum (no underlying type) used for a local variable; mark_to_drop plus
// `return` for packets whose magic byte is wrong.
#include <core.p4>
#include <v1model.p4>

typedef bit<8> byte_t;
typedef bit<9> port_t;

const port_t OUT_PORT = 2;
const byte_t MAGIC = 0x42;
const bit<16> K = 16w0x1000 + 16w5;

enum bit<8> Op_e {
    ADD = 1,
    SUB = 2,
    XOR = 3
}

enum Mode_e {
    Fast,
    Slow
}

header cmd_t {
    byte_t  magic;
    bit<8>  op;
    byte_t  x;
    byte_t  y;
    byte_t  res;
    bit<8>  mode;   // 1 when x > 10 (Mode_e.Slow), else 0
    bit<16> k;      // K
    bit<8>  opv;    // (bit<8>)Op_e.XOR
}

struct headers_t { cmd_t cmd; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.cmd);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = OUT_PORT;
        if (hdr.cmd.magic != MAGIC) {
            mark_to_drop(standard_metadata);
            return;
        }
        Op_e op = (Op_e)hdr.cmd.op;
        if (op == Op_e.ADD) {
            hdr.cmd.res = hdr.cmd.x + hdr.cmd.y;
        } else if (op == Op_e.SUB) {
            hdr.cmd.res = hdr.cmd.x - hdr.cmd.y;
        } else if (op == Op_e.XOR) {
            hdr.cmd.res = hdr.cmd.x ^ hdr.cmd.y;
        } else {
            hdr.cmd.res = 0xFF;
        }
        Mode_e mode = Mode_e.Fast;
        if (hdr.cmd.x > 10) {
            mode = Mode_e.Slow;
        }
        if (mode == Mode_e.Slow) {
            hdr.cmd.mode = 1;
        } else {
            hdr.cmd.mode = 0;
        }
        hdr.cmd.k = K;
        hdr.cmd.opv = (bit<8>)Op_e.XOR;
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.cmd);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
