// varbit.p4 -- varbit fields (P4-16 7.1.6, core.p4's two-argument extract).
//
// Covers: IPv4 options as varbit<320> extracted with a run-time size computed
// from ihl; verify_checksum / update_checksum over a field list that ends with
// the options (the checksum covers however many option bytes the packet has);
// a header with fixed fields before and after its varbit field (tlv_t), sized
// from lookahead; varbit equality (same width and value) and inequality;
// varbit assignment through a local variable (the width travels with the
// value, so a swap changes both headers' sizes on the wire); minSizeInBits /
// maxSizeInBytes of a type; emission of varbit headers; the parser errors of a
// variable-size extract: HeaderTooShort (size above the maximum: nothing is
// consumed), ParserInvalidArgument (not a whole number of bytes) and
// PacketTooShort (the packet ends first).
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header ipv4_options_t {
    varbit<320> options;
}

// kind, len (bytes of value), value, trailer
header tlv_t {
    bit<8>     kind;
    bit<8>     len;
    varbit<48> value;
    bit<8>     trailer;
}

struct headers_t {
    ethernet_t     ethernet;
    ipv4_t         ipv4;
    ipv4_options_t opts;
    tlv_t          t1;
    tlv_t          t2;
}

struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            0x88b5: parse_tlv_bytes;
            0x88b6: parse_tlv_bits;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.opts, ((bit<32>) hdr.ipv4.ihl - 5) * 32);
        transition accept;
    }
    state parse_tlv_bytes {
        // the size of value is len bytes
        pkt.extract(hdr.t1, (bit<32>) pkt.lookahead<bit<16>>()[7:0] * 8);
        pkt.extract(hdr.t2, (bit<32>) pkt.lookahead<bit<16>>()[7:0] * 8);
        transition accept;
    }
    state parse_tlv_bits {
        // here len counts bits, so a len that is not a multiple of 8 is refused
        pkt.extract(hdr.t1, (bit<32>) pkt.lookahead<bit<16>>()[7:0]);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr,
              hdr.opts.options },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        bit<8> code = 0xff;
        if (standard_metadata.parser_error == error.NoError) {
            code = 0;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            code = 1;
        } else if (standard_metadata.parser_error == error.HeaderTooShort) {
            code = 4;
        } else if (standard_metadata.parser_error == error.ParserInvalidArgument) {
            code = 6;
        }
        hdr.ethernet.dstAddr[7:0] = code;
        standard_metadata.egress_spec = 3;
        if (code != 0) {
            // not emitted: the output is Ethernet + the bytes the parser did not take
            hdr.ipv4.setInvalid();
            return;
        }
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            if (standard_metadata.checksum_error == 1) {
                hdr.ipv4.diffserv = 0xEE;
            }
            // the sizes of the options header: without and with its varbit field
            hdr.ethernet.srcAddr[23:16] = (bit<8>) ipv4_options_t.minSizeInBits();
            hdr.ethernet.srcAddr[31:24] = (bit<8>) ipv4_options_t.maxSizeInBytes();
            standard_metadata.egress_spec = 1;
        } else if (hdr.t1.isValid() && !hdr.t2.isValid()) {
            standard_metadata.egress_spec = 5;
        } else if (hdr.t1.isValid()) {
            if (hdr.t1.value == hdr.t2.value) {
                standard_metadata.egress_spec = 2;
            } else if (hdr.t1.value != hdr.t2.value) {
                standard_metadata.egress_spec = 4;
            }
            hdr.ethernet.srcAddr[23:16] = (bit<8>) tlv_t.minSizeInBits();
            // swap the values (not the lengths): the sizes go with the values
            varbit<48> tmp = hdr.t1.value;
            hdr.t1.value = hdr.t2.value;
            hdr.t2.value = tmp;
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr,
              hdr.opts.options },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.opts);
        pkt.emit(hdr.t1);
        pkt.emit(hdr.t2);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
