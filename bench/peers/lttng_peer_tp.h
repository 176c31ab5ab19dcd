/* The LTTng-UST tracepoints of bench/peers/lttng_peer.c: one event per traced call, with the
 * fields icxtrace records for it (its entry TSC as a field; LTTng adds its own timestamp). */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER icxpeer

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./lttng_peer_tp.h"

#if !defined(LTTNG_PEER_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define LTTNG_PEER_TP_H

#include <lttng/tracepoint.h>
#include <stdint.h>

/* LTTng's macro language, laid out as its documentation does */
/* clang-format off */
LTTNG_UST_TRACEPOINT_EVENT(icxpeer, copy,
    LTTNG_UST_TP_ARGS(uint64_t, t0, int, src_dev, int, dst_dev, uint64_t, bytes,
                      uint64_t, stream, int, result),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, t0, t0)
        lttng_ust_field_integer(int, src_dev, src_dev)
        lttng_ust_field_integer(int, dst_dev, dst_dev)
        lttng_ust_field_integer(uint64_t, bytes, bytes)
        lttng_ust_field_integer_hex(uint64_t, stream, stream)
        lttng_ust_field_integer(int, result, result)))

LTTNG_UST_TRACEPOINT_EVENT(icxpeer, post_send,
    LTTNG_UST_TP_ARGS(uint64_t, t0, uint32_t, qp_num, int, opcode, uint64_t, bytes,
                      uint64_t, wr_id, int, result),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, t0, t0)
        lttng_ust_field_integer(uint32_t, qp_num, qp_num)
        lttng_ust_field_integer(int, opcode, opcode)
        lttng_ust_field_integer(uint64_t, bytes, bytes)
        lttng_ust_field_integer(uint64_t, wr_id, wr_id)
        lttng_ust_field_integer(int, result, result)))

LTTNG_UST_TRACEPOINT_EVENT(icxpeer, allreduce,
    LTTNG_UST_TP_ARGS(uint64_t, t0, uint64_t, count, int, dtype, int, op, uint64_t, comm,
                      uint64_t, stream, int, result),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, t0, t0)
        lttng_ust_field_integer(uint64_t, count, count)
        lttng_ust_field_integer(int, dtype, dtype)
        lttng_ust_field_integer(int, op, op)
        lttng_ust_field_integer_hex(uint64_t, comm, comm)
        lttng_ust_field_integer_hex(uint64_t, stream, stream)
        lttng_ust_field_integer(int, result, result)))
/* clang-format on */

#endif

#include <lttng/tracepoint-event.h>
