/* Strand SDK — size bands for a tuner (strand/tuner.h): "collectives of at most SIZE bytes run on
 * N channels, and an all-reduce of that size on protocol PROTO", parsed from one knob, and the rule
 * by which a tuner answers NCCL from them without ever choosing what NCCL did not offer.
 *
 * Why in the SDK: NCCL sizes a communicator's channels once, from the link speed a net plugin
 * reports, and then splits every collective over all of them, small ones too; a transport whose
 * small collectives pay per channel (a socket's proxy round trip, a libfabric rail) wants fewer
 * channels below some size and NCCL's count above. strand-socket and strand-ofi both say that
 * with the same grammar and the same rule; each keeps only its variable's name and its defaults.
 *
 * The grammar (one knob, e.g. STRAND_SOCKET_TUNER_CHANNELS):
 *   ITEM[,ITEM...]   ITEM = SIZE:CHANNELS[:PROTO], blanks allowed around every part
 *   SIZE      an integer with an optional binary suffix K, M or G (x1024^n; "KB"/"KiB" too); the
 *             band covers collectives of at most SIZE bytes (NCCL's nBytes); sizes must strictly
 *             increase from item to item; above the last band NCCL's choices stay
 *   CHANNELS  0..STRAND_TUNER_MAX_CHANNELS; 0 = NCCL's own count
 *   PROTO     ll, ll128 or simple (case-insensitive): an all-reduce in the band runs on it
 *   ""        no bands (the tuner changes nothing)
 * A malformed value is an error whose text names the item and says what was expected: the caller
 * WARNs with its variable's name and fails its init (the project's rule for a bad value).
 *
 * The rule (strand_tuner_bands_apply): act only when NCCL's cheapest runnable entry is ring, tree
 * or PAT (NCCL caps nChannels at what the comm opened for those; CollNet/NVLS take it as given),
 * only when nChannels is still 0 (nobody answered yet), and only by setting nChannels and lowering
 * one runnable entry of the algorithm NCCL picked to 0; an entry NCCL marked ignored or negative
 * is never written. All functions are pure (no state, thread-safe). */
#ifndef STRAND_TUNER_BANDS_H
#define STRAND_TUNER_BANDS_H

#include <stddef.h>
#include <stdint.h>

#include "strand/abi/tuner.h"
#include "strand/abi/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STRAND_TUNER_MAX_BANDS 16

typedef struct {
  uint64_t max_bytes; /* the band covers collectives of at most this many bytes */
  int channels;       /* 0 = NCCL's count */
  int proto;          /* STRAND_PROTO_* made cheapest for an all-reduce; STRAND_PROTO_UNDEF: NCCL's */
} strand_tuner_band_t;

typedef struct {
  int nbands; /* 0 = no bands */
  strand_tuner_band_t bands[STRAND_TUNER_MAX_BANDS]; /* max_bytes strictly increasing */
} strand_tuner_bands_t;

/* Parse `text` (NULL counts as ""). STRAND_SUCCESS, or STRAND_INVALID_USAGE with *bands untouched
 * and `err` (may be NULL) saying which item is wrong and what was expected, e.g.
 * "item 2 ('512:2'): sizes must increase from item to item (512 bytes after 1024)". */
strand_result_t strand_tuner_bands_parse(const char *text, strand_tuner_bands_t *bands, char *err,
                                         size_t errlen);
/* The band a collective of nbytes falls in (the first with nbytes <= max_bytes), or NULL above the
 * last band. */
const strand_tuner_band_t *strand_tuner_bands_find(const strand_tuner_bands_t *bands,
                                                   uint64_t nbytes);
/* The channels for a collective of nbytes: its band's, or 0 (NCCL's count) above the last. */
int strand_tuner_bands_channels(const strand_tuner_bands_t *bands, uint64_t nbytes);
/* "<=64K:2 <=2M:4:simple above:NCCL" for an INFO line; always NUL-terminated, truncated to len. */
void strand_tuner_bands_format(const strand_tuner_bands_t *bands, char *buf, size_t len);

/* "MIN-MAX" with sizes as above (MIN <= MAX, MAX > 0), or "", "0" or "off" for none (*min = *max =
 * 0). On error *min / *max are untouched and `err` says why. For a tuner's "sizes in this range"
 * knob (strand-socket's STRAND_SOCKET_TUNER_ALLGATHER_RING). */
strand_result_t strand_tuner_size_range_parse(const char *text, uint64_t *min, uint64_t *max,
                                              char *err, size_t errlen);
/* A size as the grammar writes it: "64K", "2M", "1G", or plain bytes when not a whole multiple. */
void strand_tuner_size_format(uint64_t v, char *buf, size_t len);

/* The algorithm NCCL will run: the one of its cheapest runnable entry (not STRAND_ALGO_PROTO_IGNORE,
 * not negative; the first such on ties, as NCCL takes it), or STRAND_ALGO_UNDEF when none is. */
int strand_tuner_nccl_algo(float **table, int numAlgo, int numProto);
/* Make `algo` NCCL's choice: lower its cheapest runnable entry to 0. Returns 0 when done, -1 when
 * `algo` has no runnable entry (nothing is written then). Ties with another algorithm's 0 entry go
 * to whichever comes first in the table (NCCL takes the first strictly cheaper entry). */
int strand_tuner_prefer_algo(float **table, int numAlgo, int numProto, int algo);
/* Answer NCCL from the bands by the rule above, for the algorithm NCCL picked (`algo`, from
 * strand_tuner_nccl_algo): nChannels from nBytes' band, and for an all-reduce in a band that names
 * a protocol, that protocol's entry of `algo` lowered to 0 when it is runnable. Leaves everything
 * as it came in outside the rule. */
void strand_tuner_bands_apply(const strand_tuner_bands_t *bands, strand_tuner_func_t func,
                              uint64_t nBytes, int algo, float **table, int numProto,
                              int *nChannels);

#ifdef __cplusplus
}
#endif

#endif
