/* SPDX-License-Identifier: MIT */
/*
 * What a message carries besides its chunks (xfer.c): a word in the
 * completion data (FI_REMOTE_CQ_DATA) of chunk 0, and of a sender's abort
 * stand-ins.  Kept apart so that the tests can check the encoding at
 * lengths they cannot send.
 *
 * Chunk 0's word is the sender's message length, so that a receive posted
 * for another length fails at once and takes exactly the sender's chunks
 * off the wire (a shorter message alone shows in a short chunk; a longer
 * one does not, its chunks are all full).  It travels as CQ data, not as a
 * header in the payload:
 *  - the provider carries CQ data in its own message header (rxm, shm,
 *    efa), so the payload stays where the caller registered it: a header
 *    would need a second iov beside every chunk 0 (a registered host
 *    buffer next to a dma-buf, which shm and efa treat with the first
 *    iov's memory type) or a copy through staging, on exactly the
 *    zero-copy paths the library exists for;
 *  - it costs no bytes and no extra message.
 * The fabric does not ask for CQ data (fabric_hints.h has no cq_data_size):
 * the library uses what the provider grants.  tcp, shm, sockets and
 * udp;ofi_rxd grant 8 bytes (fi_info, libfabric 1.17), efa's RDM endpoint
 * and verbs 4; the word is 32 bits so that one encoding serves every
 * provider.  A provider that grants fewer sends chunk 0 without it: its
 * receivers still find a shorter message (a short chunk) but not a longer
 * one.
 *
 * Layout of the 32 bits: VALID marks a word (0 is what a provider reports
 * for no data); below it either the length, or, from 1 GiB on, the chunk
 * count (CHUNKS set), which the chunks' own lengths then complete.  An
 * abort stand-in's word is VALID and the sender's errno.
 */
#ifndef PD_XFER_WIRE_H
#define PD_XFER_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PD_WIRE_DATA_BYTES	4u		/* CQ data the provider must carry */
#define PD_WIRE_VALID		0x80000000u
#define PD_WIRE_CHUNKS		0x40000000u
#define PD_WIRE_VALUE		0x3fffffffu
#define PD_WIRE_MAX_CHUNKS	0xffffu		/* PD_CHUNK_BITS of chunk index */

static inline uint32_t pd_wire_len_word(uint64_t len, size_t chunk)
{
	if (len <= PD_WIRE_VALUE)
		return PD_WIRE_VALID | (uint32_t)len;
	return PD_WIRE_VALID | PD_WIRE_CHUNKS | (uint32_t)(len / chunk + (len % chunk != 0));
}

/*
 * Chunk 0's word: false if there is none.  Else *len is the sender's
 * length (0 if only the count is known) and *nchunks its chunk count.
 */
static inline bool pd_wire_parse_len(uint64_t data, size_t chunk, uint64_t *len,
				     uint32_t *nchunks)
{
	uint32_t v = (uint32_t)data & PD_WIRE_VALUE;

	if (data >> 32 || !(data & PD_WIRE_VALID) || !v)
		return false;
	if (data & PD_WIRE_CHUNKS) {
		if (v > PD_WIRE_MAX_CHUNKS)
			return false;
		*len = 0;
		*nchunks = v;
		return true;
	}
	*len = v;
	*nchunks = (uint32_t)(v / chunk + (v % chunk != 0));
	return true;
}

/* An abort stand-in's word: why the sender gave up (a negative errno). */
static inline uint32_t pd_wire_abort_word(int err)
{
	return PD_WIRE_VALID | ((uint32_t)(err < 0 ? -err : err) & 0xffffu);
}

/* The sender's errno from a stand-in's word, or 0 if it carried none. */
static inline int pd_wire_abort_errno(uint64_t data)
{
	if (data >> 32 || !(data & PD_WIRE_VALID))
		return 0;
	return -(int)(data & 0xffffu);
}

#endif
