/* gpt2_mpi.h — gpt2.cuh's batch generation sharded across MPI ranks (one rank per GPU, any number of nodes).

   Do this, in *one* C or C++ (or CUDA) file, after gpt2.cuh's implementation:
       #define GPT2_IMPLEMENTATION
       #include "gpt2.cuh"
       #define GPT2_MPI_IMPLEMENTATION
       #include "gpt2_mpi.h"
   Every other file includes gpt2.cuh and then gpt2_mpi.h plainly and sees only the API below.

   Build with your MPI's flags, e.g. Open MPI:
       mpicc -O3 -fopenmp -x c -DGPT2_NO_CUDA app.c -lm                                  (CPU only)
       nvcc -O3 -x cu $(mpicc --showme:compile) app.cu -lcublasLt -lcublas $(mpicc --showme:link)
   and run it under mpirun: `mpirun -np 8 ./app`.

   What it does:
       gpt2_mpi_local_rank   this rank's index among the ranks on its node: pick the GPU with it
       gpt2_mpi_load         rank 0 alone opens config.json + model.safetensors; ranks on its node that
                             see the same file (device, inode, size, modification time) map it themselves,
                             every other rank receives the bytes by broadcast (no shared file system needed;
                             GPT2_MPI_BROADCAST=1 in a rank's environment makes it receive them too); every
                             rank builds its model from the same bytes
       gpt2_mpi_generate     rank 0 holds the requests; they are split across the ranks, balanced by
                             cost (prompt_len + max_new_tokens: longest first onto the least-loaded rank),
                             generated there with gpt2_generate and gathered back into rank 0's buffers
       gpt2_mpi_score        rank 0 holds the texts; they are split the same way, balanced by n_tokens, scored
                             there with gpt2_score and gathered back into rank 0's buffers
   All four are collective: every rank of the communicator calls them, in the same order.

   What crosses. Every field of a request, the ones behind pointers included: the prompt, gpt2_sampling's
   scalars and its bias list (bias_ids and bias), stop_token and stop_ids, the stop strings' bytes,
   top_logprobs and whether out_logprobs was given. Stop strings need their tokenizer where the request runs:
   when some request has stop strings, each distinct tokenizer of rank 0's is broadcast once as the bytes of
   the model's ids (0 .. n_vocab - 1, up to the first id it has no token for) and rebuilt on the other ranks as
   a decode-only tokenizer, which is all matching needs. A text to score crosses with its tokens, n_context,
   stride and whether logprobs and ranks were given.
   What comes back to rank 0, into the caller's buffers: out, n_out, finish_reason, text_len, out_logprobs,
   out_top_ids and out_top_logprobs for the tokens made; logprobs, ranks, sum_logprob and n_scored for a text.
   Floats and doubles travel as their bytes, so every value is bit for bit what the rank computed.
   Outputs equal a single-process gpt2_generate / gpt2_score of the same requests for any rank count (each
   request's tokens depend only on its prompt, parameters and seed; a token's log-probability only on its
   window), including more ranks than requests, when every rank's model runs the same backend and dtype.
   gpt2_mpi_score needs the same max_seq on every rank (the windows' length) and fails otherwise.
   on_token runs on the rank that generates the request and gets the request's index in rank 0's array.

   Errors: a failure on any rank (unreadable file, bad request, out of memory, device) is returned on
   every rank as the same status, and gpt2_last_error() reads "rank R of N: why" everywhere; nobody
   hangs. Rank 0 checks every request's fields as gpt2_generate / gpt2_score would before anything is sent,
   so a bad field reads "rank 0 of N: request 3: ..." with rank 0's index; each rank checks again against its
   own model (max_seq, what its backend runs). One call sends at most 2^31 4-byte words of requests and of
   results (split larger jobs into several calls). Failures inside MPI itself follow the communicator's MPI
   error handler: by default MPI aborts the job. Ranks must run the same build (requests travel as raw bytes).

   Example (error handling shortened):
       MPI_Init(&argc, &argv);
       int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
       gpt2_options opt = gpt2_default_options();
       opt.device = gpt2_mpi_local_rank(MPI_COMM_WORLD);
       gpt2_model *m;
       if (gpt2_mpi_load(MPI_COMM_WORLD, &m, "weights", &opt)) { if (!rank) puts(gpt2_last_error()); return 1; }
       gpt2_request *reqs = NULL; int n = 0;
       if (rank == 0) { ... fill n requests as for gpt2_generate ... }
       gpt2_mpi_generate(MPI_COMM_WORLD, m, reqs, n, NULL, NULL);   (rank 0 now holds every output)
       gpt2_free(m);
       MPI_Finalize();

   License: MIT, as gpt2.cuh.
*/
#ifndef GPT2_MPI_H
#define GPT2_MPI_H

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1   /* only MPI's C API is used: leave the deprecated C++ bindings out */
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include "gpt2.cuh"

/* ---------------------------------------------------------------- public API */

/* this rank's index among the ranks of comm on the same node (0..), or -1 on an MPI error */
GPT2_API int gpt2_mpi_local_rank(MPI_Comm comm);
/* as gpt2_load, collective: only rank 0 needs path (ranks on its node map the same file, the others get
   the bytes from rank 0); opt may differ per rank (e.g. the device) */
GPT2_API gpt2_status gpt2_mpi_load(MPI_Comm comm, gpt2_model **model, const char *path, const gpt2_options *opt);
/* as gpt2_generate, collective: rank 0 passes the requests, every other rank passes NULL, 0 */
GPT2_API gpt2_status gpt2_mpi_generate(MPI_Comm comm, gpt2_model *model, gpt2_request *reqs, int n,
                                       gpt2_token_fn on_token, void *user);
/* as gpt2_score, collective: rank 0 passes the texts, every other rank passes NULL, 0 */
GPT2_API gpt2_status gpt2_mpi_score(MPI_Comm comm, gpt2_model *model, gpt2_score_request *reqs, int n);

#endif /* GPT2_MPI_H */

#ifdef GPT2_MPI_IMPLEMENTATION
#ifndef GPT2_MPI_IMPLEMENTATION_DONE
#define GPT2_MPI_IMPLEMENTATION_DONE

#ifndef GPT2_IMPLEMENTATION_DONE
#error "gpt2_mpi.h: define GPT2_IMPLEMENTATION and include gpt2.cuh before defining GPT2_MPI_IMPLEMENTATION"
#endif

#include <limits.h>

/* ---------------------------------------------------------------- agreement: one status for every rank */

/* Records an MPI failure (rc != MPI_SUCCESS) as GPT2_ERR_MPI; returns GPT2_OK otherwise. */
static gpt2_status gpt2__mpi_rc(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return GPT2_OK;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
    return gpt2__fail(GPT2_ERR_MPI, "%s failed: %s", what, text);
}

/* GPT2_OK when MPI is running (between MPI_Init and MPI_Finalize), else why not. */
static gpt2_status gpt2__mpi_running(const char *fn) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return gpt2__fail(GPT2_ERR_MPI, "%s: MPI is not running (call it between MPI_Init and MPI_Finalize)", fn);
    return GPT2_OK;
}

/* Collective. Every rank passes its local status; every rank gets back the status of the lowest-numbered
   failing rank, with that rank's message as its last error ("rank R of N: why"), or GPT2_OK everywhere. */
static gpt2_status gpt2__mpi_agree(MPI_Comm comm, gpt2_status local) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    struct { int ok, rank; } mine, first;
    mine.ok = local == GPT2_OK;
    mine.rank = rank;
    gpt2_status st = gpt2__mpi_rc(MPI_Allreduce(&mine, &first, 1, MPI_2INT, MPI_MINLOC, comm), "MPI_Allreduce");
    if (st) return st;
    if (first.ok) return GPT2_OK;
    /* the failing rank sends its status and message: [4-byte status][message, NUL-terminated] */
    char msg[4 + GPT2_MAX_ERROR];
    if (rank == first.rank) {
        int code = (int)local;
        memcpy(msg, &code, 4);
        snprintf(msg + 4, GPT2_MAX_ERROR, "%s", gpt2_last_error());
    }
    st = gpt2__mpi_rc(MPI_Bcast(msg, (int)sizeof msg, MPI_BYTE, first.rank, comm), "MPI_Bcast");
    if (st) return st;
    int code;
    memcpy(&code, msg, 4);
    msg[sizeof msg - 1] = 0;
    return gpt2__fail((gpt2_status)code, "rank %d of %d: %s", first.rank, size, msg + 4);
}

/* Broadcasts n bytes from rank 0 in pieces MPI's int counts can hold. */
static gpt2_status gpt2__mpi_bcast_bytes(MPI_Comm comm, void *buf, size_t n, const char *what) {
    unsigned char *p = (unsigned char *)buf;
    while (n > 0) {
        int piece = n > ((size_t)1 << 30) ? 1 << 30 : (int)n;
        gpt2_status st = gpt2__mpi_rc(MPI_Bcast(p, piece, MPI_BYTE, 0, comm), what);
        if (st) return st;
        p += piece;
        n -= (size_t)piece;
    }
    return GPT2_OK;
}

/* ---------------------------------------------------------------- node-local rank */

GPT2_API int gpt2_mpi_local_rank(MPI_Comm comm) {
    int rank, local = -1;
    MPI_Comm node;
    if (gpt2__mpi_running("gpt2_mpi_local_rank")) return -1;
    if (gpt2__mpi_rc(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank")) return -1;
    if (gpt2__mpi_rc(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type"))
        return -1;
    if (gpt2__mpi_rc(MPI_Comm_rank(node, &local), "MPI_Comm_rank")) local = -1;
    MPI_Comm_free(&node);
    return local;
}

/* ---------------------------------------------------------------- loading: rank 0 reads, everyone builds */

/* Rank 0's model files as it saw them: the sizes, whether path is a directory, and the safetensors file's
   identity (device, inode, modification time), by which a rank on rank 0's node knows it sees the same file. */
typedef struct gpt2__mpi_file { unsigned long long cfg_len, st_len, is_dir, dev, ino, mtime; } gpt2__mpi_file;

static void gpt2__mpi_identity(const char *st_path, gpt2__mpi_file *f) {
    struct stat sb;
    if (stat(st_path, &sb) != 0) return; /* all zero: no rank maps it */
    f->dev = (unsigned long long)sb.st_dev;
    f->ino = (unsigned long long)sb.st_ino;
    f->mtime = (unsigned long long)sb.st_mtime;
}

/* Whether this rank (not rank 0) maps rank 0's safetensors file itself rather than receiving its bytes: it runs
   on rank 0's node (`near`), sees a file of the same identity and size under the same name, and
   GPT2_MPI_BROADCAST is unset or "0" (set, every rank receives the bytes). Never on Windows, whose st_ino is 0. */
static int gpt2__mpi_maps_itself(int near, const char *st_path, const gpt2__mpi_file *f) {
#if defined(_WIN32)
    (void)near; (void)st_path; (void)f;
    return 0;
#else
    const char *env = getenv("GPT2_MPI_BROADCAST");
    if (!near || (env && *env && strcmp(env, "0")) || !f->ino) return 0;
    struct stat sb;
    return stat(st_path, &sb) == 0 && (unsigned long long)sb.st_dev == f->dev && (unsigned long long)sb.st_ino == f->ino &&
           (unsigned long long)sb.st_mtime == f->mtime && (unsigned long long)sb.st_size == f->st_len;
#endif
}

/* ---------------------------------------------------------------- MPI: any checkpoint as one image */

/* One safetensors image of the slots' tensors as they are stored (F32, F16, BF16): gpt2_mpi_load's rank 0
   sends any checkpoint as this image. *out is allocated (the caller frees it). */
static gpt2_status gpt2__slots_to_safetensors(const gpt2__slot *slots, int n_slots, unsigned char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    size_t hdr = 2, body = 0;
    char entry[256];
    for (int pass = 0; pass < 2; pass++) {
        unsigned char *h = pass ? *out + 8 : NULL, *b = pass ? *out + 8 + hdr : NULL;
        size_t at = 0, w = 0;
        if (pass) h[w++] = '{';
        int any = 0; /* entries written so far */
        for (int i = 0; i < n_slots; i++) {
            const gpt2__slot *s = &slots[i];
            if (s->optional && !s->found) continue;
            size_t esize = s->dtype == 'F' ? 4 : 2, count, bytes;
            if (!s->found || !gpt2__mul_ok(s->shape[0], s->shape[1], &count) || !gpt2__mul_ok(count, esize, &bytes) ||
                bytes > (size_t)-1 / 2 - at)
                return gpt2__fail(GPT2_ERR_FORMAT, "tensor \"%s\" cannot be written to a safetensors image", s->name);
            int n = s->ndim == 1 ? snprintf(entry, sizeof entry, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}",
                                            any ? "," : "", s->name, s->dtype == 'F' ? "F32" : s->dtype == 'H' ? "F16" : "BF16",
                                            s->shape[0], at, at + bytes)
                                 : snprintf(entry, sizeof entry, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%zu,%zu],\"data_offsets\":[%zu,%zu]}",
                                            any ? "," : "", s->name, s->dtype == 'F' ? "F32" : s->dtype == 'H' ? "F16" : "BF16",
                                            s->shape[0], s->shape[1], at, at + bytes);
            if (n < 0 || (size_t)n >= sizeof entry) return gpt2__fail(GPT2_ERR_FORMAT, "tensor \"%s\": name too long", s->name);
            if (pass) {
                memcpy(h + w, entry, (size_t)n);
                if (bytes) memcpy(b + at, s->src, bytes);
            }
            w += (size_t)n;
            at += bytes;
            any = 1;
        }
        if (!pass) {
            hdr = (w + 2 + 7) / 8 * 8; /* '{' ... '}' padded with spaces to a multiple of 8, as safetensors writers do */
            body = at;
            if (body > (size_t)-1 - 8 - hdr) return gpt2__fail(GPT2_ERR_FORMAT, "the model is too large for one image");
            *out = (unsigned char *)gpt2__alloc(8 + hdr + body);
            if (!*out) return gpt2__fail(GPT2_ERR_OOM, "cannot allocate %zu MB for the model's image", (8 + hdr + body) >> 20);
        } else {
            h[w++] = '}';
            while (w < hdr) h[w++] = ' ';
        }
    }
    for (int i = 0; i < 8; i++) (*out)[i] = (unsigned char)((uint64_t)hdr >> (8 * i));
    *len = 8 + hdr + body;
    return GPT2_OK;
}

/* The checkpoint as one safetensors image for the config in cfg_text: what gpt2_mpi_load's rank 0 sends when
   the weights are not already one safetensors file. *out is allocated (the caller frees it). */
static gpt2_status gpt2__ckpt_image(gpt2__ckpt *ck, const char *cfg_text, size_t cfg_len, const char *cfg_name,
                                    unsigned char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    gpt2_model *m = (gpt2_model *)gpt2__zalloc(sizeof *m);
    if (!m) return gpt2__fail(GPT2_ERR_OOM, "cannot allocate the model");
    gpt2__slot *slots = NULL;
    int n_slots = 0;
    gpt2_status st = gpt2__parse_config(cfg_text, cfg_len, cfg_name, &m->cfg, &m->n_inner, &m->arch);
    if (!st) st = gpt2__weights_layout(m, gpt2__ckpt_bytes(ck), ck->name, 0, &slots, &n_slots);
    if (!st) st = gpt2__ckpt_read(ck, slots, n_slots);
    if (!st) st = gpt2__slots_to_safetensors(slots, n_slots, out, len);
    GPT2_FREE(slots);
    gpt2_free(m);
    return st;
}

GPT2_API gpt2_status gpt2_mpi_load(MPI_Comm comm, gpt2_model **model, const char *path, const gpt2_options *opt) {
    int rank = 0;
    gpt2_status st = gpt2__mpi_running("gpt2_mpi_load");
    if (st) return st;
    st = gpt2__mpi_rc(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    if (st) return st;
    if (model) *model = NULL;
    char cfg_path[4096], st_path[4096];
    char *cfg_text = NULL;
    unsigned char *st_data = NULL;
    size_t cfg_len = 0, st_len = 0;
    int mapped = 0, itself = 0, near = 0, root_here = rank == 0;
    MPI_Comm node = MPI_COMM_NULL, senders = MPI_COMM_NULL;
    gpt2_model *m = NULL;
    gpt2__mpi_file f;
    memset(&f, 0, sizeof f);

    if (!model) st = gpt2__fail(GPT2_ERR_ARG, "gpt2_mpi_load: model is NULL");
    else if (!path || !*path) st = gpt2__fail(GPT2_ERR_ARG, "gpt2_mpi_load: path is empty");
    else if (strlen(path) + 32 >= sizeof st_path) st = gpt2__fail(GPT2_ERR_ARG, "gpt2_mpi_load: path is too long");
    /* rank 0 reads both files */
    if (!st && rank == 0) {
        struct stat sb;
        if (stat(path, &sb) != 0) st = gpt2__fail(GPT2_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    }
    if (!st && rank == 0) {
        f.is_dir = (unsigned long long)gpt2__is_dir(path);
        gpt2__model_paths(path, (int)f.is_dir, cfg_path, st_path, sizeof st_path);
        gpt2__ckpt ck;
        st = gpt2__read_file(cfg_path, &cfg_text, &cfg_len);
        if (!st && !(st = gpt2__ckpt_open(&ck, path))) {
            if (!ck.sharded && ck.files[0].fmt == 'S') { /* one safetensors file: sent (or mapped near rank 0) as it is */
                st_data = ck.files[0].data;
                st_len = ck.files[0].len;
                mapped = ck.files[0].mapped;
                ck.files[0].data = NULL; /* `done` unmaps it */
                gpt2__mpi_identity(st_path, &f);
            } else { /* any other checkpoint: one safetensors image of the tensors the config uses, broadcast */
                st = gpt2__ckpt_image(&ck, cfg_text, cfg_len, cfg_path, &st_data, &st_len);
                mapped = 0; /* heap memory: gpt2__unmap_file(.., 0) frees it; no identity, so no rank maps a file */
            }
            gpt2__ckpt_close(&ck);
        }
        f.cfg_len = cfg_len;
        f.st_len = st_len;
    }
    if ((st = gpt2__mpi_agree(comm, st))) goto done;
    if ((st = gpt2__mpi_rc(MPI_Bcast(&f, (int)(sizeof f / sizeof(unsigned long long)), MPI_UNSIGNED_LONG_LONG, 0, comm), "MPI_Bcast"))) goto done;
    /* the file names as rank 0 saw them: they label error messages on every rank */
    gpt2__model_paths(path, (int)f.is_dir, cfg_path, st_path, sizeof st_path);
    /* ranks on rank 0's node that see its file map it (no copy, no broadcast); the others receive the bytes */
    if ((st = gpt2__mpi_rc(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type"))) goto done;
    if ((st = gpt2__mpi_rc(MPI_Allreduce(&root_here, &near, 1, MPI_INT, MPI_MAX, node), "MPI_Allreduce"))) goto done;
    if (rank != 0 && gpt2__mpi_maps_itself(near, st_path, &f)) {
        size_t len = 0;
        /* a file that cannot be mapped here after all is received instead */
        if (gpt2__map_file(st_path, &st_data, &len, &mapped) == GPT2_OK && st_data && len == (size_t)f.st_len) itself = 1;
        else if (st_data) { gpt2__unmap_file(st_data, len, mapped); st_data = NULL; }
        st_len = len; /* what `done` unmaps, whatever fails next */
    }
    if ((st = gpt2__mpi_rc(MPI_Comm_split(comm, itself ? MPI_UNDEFINED : 0, rank, &senders), "MPI_Comm_split"))) goto done;
    /* the other ranks make room for the bytes */
    if (rank != 0) {
        cfg_len = (size_t)f.cfg_len;
        st_len = (size_t)f.st_len;
        if (f.cfg_len != cfg_len || f.st_len != st_len) st = gpt2__fail(GPT2_ERR_OOM, "%s: %llu bytes do not fit in memory", st_path, f.st_len);
        else {
            cfg_text = (char *)gpt2__alloc(cfg_len + 1);
            if (!itself) st_data = (unsigned char *)gpt2__alloc(st_len);
            if (!cfg_text || !st_data)
                st = gpt2__fail(GPT2_ERR_OOM, "cannot allocate %zu MB for the model broadcast from rank 0",
                                (cfg_len + (itself ? 0 : st_len)) >> 20);
        }
    }
    if ((st = gpt2__mpi_agree(comm, st))) goto done;
    st = gpt2__mpi_bcast_bytes(comm, cfg_text, cfg_len, "MPI_Bcast of config.json");
    if (!st && senders != MPI_COMM_NULL) st = gpt2__mpi_bcast_bytes(senders, st_data, st_len, "MPI_Bcast of the model bytes");
    if (!st && rank != 0) cfg_text[cfg_len] = 0;
    /* everyone builds its model from the same bytes */
    if (!st) st = gpt2__load_memory(&m, cfg_text, cfg_len, cfg_path, st_data, st_len, st_path, opt);
    st = gpt2__mpi_agree(comm, st);
    if (st) { gpt2_free(m); m = NULL; }

done:
    if (rank == 0 || itself) { if (st_data) gpt2__unmap_file(st_data, st_len, mapped); }
    else GPT2_FREE(st_data);
    GPT2_FREE(cfg_text);
    if (senders != MPI_COMM_NULL) MPI_Comm_free(&senders);
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
    if (m) *model = m;
    return st;
}

/* ---------------------------------------------------------------- requests on the wire: plans and packed words */

/* Requests travel in 4-byte words (MPI_UINT32_T): each request's fixed header by itself, its lists (prompt, bias,
   stop ids, stop strings; a text's tokens) packed after one another into one array of words per rank, floats and
   doubles as their bytes, so every value arrives bit for bit. Results come back the same way. */
static size_t gpt2__mpi_words(size_t bytes) { return (bytes + 3) / 4; }

/* Copies bytes into w (zero-padded to whole words); returns the word after them. */
static uint32_t *gpt2__mpi_put(uint32_t *w, const void *src, size_t bytes) {
    const size_t n = gpt2__mpi_words(bytes);
    if (n) { w[n - 1] = 0; memcpy(w, src, bytes); }
    return w + n;
}

/* Copies bytes out of w; returns the word after them. */
static const uint32_t *gpt2__mpi_get(const uint32_t *w, void *dst, size_t bytes) {
    if (bytes) memcpy(dst, w, bytes);
    return w + gpt2__mpi_words(bytes);
}

typedef struct gpt2__mpi_cost { long long cost; int index; } gpt2__mpi_cost;

/* most expensive first; equal costs in index order (so the plan is the same on every run) */
static int gpt2__mpi_cost_cmp(const void *a, const void *b) {
    const gpt2__mpi_cost *x = (const gpt2__mpi_cost *)a, *y = (const gpt2__mpi_cost *)b;
    if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Rank 0's plan for n requests over size ranks: the most expensive first onto the least-loaded rank (the lowest
   among equals). order lists the requests grouped by rank, each group in the order it was assigned; per rank, its
   requests' count and displacement in order, their headers' bytes, their payload words and their result words
   (counts and displacements: what MPI_Scatterv and MPI_Gatherv take). */
typedef struct gpt2__mpi_plan {
    int *order;
    int *req_count, *req_displ, *hdr_bytes, *hdr_displ, *word_count, *word_displ, *res_count, *res_displ;
    int *ints;   /* the one allocation behind the per-rank arrays */
} gpt2__mpi_plan;

static void gpt2__mpi_plan_free(gpt2__mpi_plan *p) {
    GPT2_FREE(p->order);
    GPT2_FREE(p->ints);
    memset(p, 0, sizeof *p);
}

/* cost, words and res: [n] each request's cost, payload words and result words (at most). Fails when the totals
   are more than one call can send (MPI's int counts). */
static gpt2_status gpt2__mpi_plan_make(gpt2__mpi_plan *p, int n, int size, const long long *cost, const long long *words,
                                       const long long *res, size_t hdr_size, const char *fn) {
    memset(p, 0, sizeof *p);
    long long word_total = 0, res_total = 0;
    for (int i = 0; i < n; i++) { word_total += words[i]; res_total += res[i]; }
    if (word_total > INT_MAX || res_total > INT_MAX || (long long)n * (long long)hdr_size > INT_MAX)
        return gpt2__fail(GPT2_ERR_ARG, "%s: %d requests of %lld words (%lld words of results) are more than one call can "
                          "send (2^31 4-byte words); split them into several calls", fn, n, word_total, res_total);
    p->order = (int *)gpt2__alloc((size_t)n * sizeof(int));
    p->ints = (int *)gpt2__zalloc((size_t)size * 10 * sizeof(int));
    gpt2__mpi_cost *sorted = (gpt2__mpi_cost *)gpt2__alloc((size_t)n * sizeof *sorted);
    int *owner = (int *)gpt2__alloc((size_t)n * sizeof(int));
    long long *load = (long long *)gpt2__zalloc((size_t)size * sizeof(long long));
    if (!p->order || !p->ints || !sorted || !owner || !load) {
        GPT2_FREE(sorted); GPT2_FREE(owner); GPT2_FREE(load);
        gpt2__mpi_plan_free(p);
        return gpt2__fail(GPT2_ERR_OOM, "%s: out of memory planning %d requests", fn, n);
    }
    int *a = p->ints;
    p->req_count = a; p->req_displ = a + size; p->hdr_bytes = a + 2 * size; p->hdr_displ = a + 3 * size;
    p->word_count = a + 4 * size; p->word_displ = a + 5 * size; p->res_count = a + 6 * size; p->res_displ = a + 7 * size;
    int *cursor = a + 8 * size;
    for (int i = 0; i < n; i++) { sorted[i].cost = cost[i]; sorted[i].index = i; }
    qsort(sorted, (size_t)n, sizeof *sorted, gpt2__mpi_cost_cmp);
    for (int k = 0; k < n; k++) {
        int i = sorted[k].index, best = 0;
        for (int r = 1; r < size; r++) if (load[r] < load[best]) best = r;
        load[best] += sorted[k].cost;
        owner[i] = best;
        p->req_count[best]++;
        p->word_count[best] += (int)words[i];
        p->res_count[best] += (int)res[i];
    }
    for (int r = 0, q = 0, w = 0, o = 0; r < size; r++) {
        p->req_displ[r] = cursor[r] = q; q += p->req_count[r];
        p->hdr_bytes[r] = p->req_count[r] * (int)hdr_size; p->hdr_displ[r] = p->req_displ[r] * (int)hdr_size;
        p->word_displ[r] = w; w += p->word_count[r];
        p->res_displ[r] = o; o += p->res_count[r];
    }
    for (int k = 0; k < n; k++) { int i = sorted[k].index; p->order[cursor[owner[i]]++] = i; }
    GPT2_FREE(sorted); GPT2_FREE(owner); GPT2_FREE(load);
    return GPT2_OK;
}

/* ---------------------------------------------------------------- generation: split, run, gather */

/* A request as it travels to its rank: its scalars; its lists follow in the payload words (the prompt, the bias ids,
   the bias values, the stop ids, the stop strings' bytes each with its NUL). */
typedef struct gpt2__mpi_req {
    int index;               /* in rank 0's array */
    int prompt_len, max_new_tokens, stop_token;
    int n_stop_ids, n_stop_strings, stop_bytes;
    int tokenizer;           /* the stop strings' tokenizer: its index among those shared, or -1 */
    int logprobs;            /* out_logprobs was given */
    int top_logprobs;
    gpt2_sampling sampling;  /* bias_ids and bias NULL: the list is in the payload */
} gpt2__mpi_req;

static long long gpt2__mpi_req_words(const gpt2__mpi_req *h) {
    return (long long)(gpt2__mpi_words((size_t)h->prompt_len * 4) + 2 * gpt2__mpi_words((size_t)h->sampling.n_bias * 4) +
                       gpt2__mpi_words((size_t)h->n_stop_ids * 4) + gpt2__mpi_words((size_t)h->stop_bytes));
}

/* A request's result words for n_out tokens: n_out, finish_reason, text_len, then the tokens, their logprobs (when
   asked for) and their top_logprobs alternatives' ids and logprobs. */
static long long gpt2__mpi_result_words(const gpt2__mpi_req *h, int n_out) {
    return 3 + (long long)n_out * (1 + (h->logprobs ? 1 : 0) + 2 * (long long)h->top_logprobs);
}

/* on_token on the generating rank, with the request's index in rank 0's array */
typedef struct gpt2__mpi_relay { gpt2_token_fn fn; void *user; const gpt2__mpi_req *hdr; } gpt2__mpi_relay;

static int gpt2__mpi_relay_token(void *user, int request, int token) {
    gpt2__mpi_relay *r = (gpt2__mpi_relay *)user;
    return r->fn(r->user, r->hdr[request].index, token);
}

/* Rank 0: checks the requests as gpt2_generate does (naming rank 0's indices): prompts and every control. The
   max_seq check and the backend's refusals are repeated on each rank against its own model. */
static gpt2_status gpt2__mpi_check_requests(const gpt2_model *m, const gpt2_request *reqs, int n) {
    if (n < 0 || (n > 0 && !reqs)) return gpt2__fail(GPT2_ERR_ARG, "gpt2_mpi_generate: %d requests at %p", n, (const void *)reqs);
    for (int i = 0; i < n; i++) {
        const gpt2_request *r = &reqs[i];
        char what[64];
        if (!r->prompt || r->prompt_len < 1)
            return gpt2__fail(GPT2_ERR_ARG, "request %d: the prompt is empty (at least one token, e.g. 50256, is needed)", i);
        if (r->max_new_tokens < 0) return gpt2__fail(GPT2_ERR_ARG, "request %d: max_new_tokens = %d is negative", i, r->max_new_tokens);
        if (r->max_new_tokens > 0 && !r->out) return gpt2__fail(GPT2_ERR_ARG, "request %d: out is NULL", i);
        snprintf(what, sizeof what, "request %d: prompt", i);
        gpt2_status st = gpt2__check_tokens(m, r->prompt, (size_t)r->prompt_len, what);
        if (!st) st = gpt2__check_controls(m, r, i);
        if (st) return st;
    }
    return GPT2_OK;
}

/* Collective: rank 0's tokenizer src becomes, on every other rank, *made: a tokenizer that decodes (and only decodes:
   gpt2_decode, all that stop strings need) the ids src decodes among 0 .. n_vocab - 1 (the model's ids, up to the
   first one src has no token for), to the same bytes. Rank 0's *made stays NULL. */
static gpt2_status gpt2__mpi_share_tokenizer(MPI_Comm comm, int rank, const gpt2_tokenizer *src, int n_vocab,
                                             gpt2_tokenizer **made) {
    long long head[2] = {0, 0}; /* ids, their bytes */
    int *lens = NULL;
    unsigned char *bytes = NULL;
    gpt2_tokenizer *t = NULL;
    gpt2_status st = GPT2_OK;
    *made = NULL;
    if (rank == 0) {
        size_t len;
        while (head[0] < n_vocab && gpt2__tok_text(src, (int)head[0], &len)) { head[1] += (long long)len; head[0]++; }
        lens = (int *)gpt2__alloc((size_t)head[0] * sizeof(int));
        bytes = (unsigned char *)gpt2__alloc((size_t)head[1]);
        if (!lens || !bytes) st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_generate: out of memory sharing a tokenizer");
        for (long long id = 0, at = 0; !st && id < head[0]; id++) {
            const unsigned char *p = gpt2__tok_text(src, (int)id, &len);
            memcpy(bytes + at, p, len);
            lens[id] = (int)len;
            at += (long long)len;
        }
    }
    if ((st = gpt2__mpi_agree(comm, st))) goto done;
    if ((st = gpt2__mpi_rc(MPI_Bcast(head, 2, MPI_LONG_LONG, 0, comm), "MPI_Bcast of a tokenizer's size"))) goto done;
    if (rank != 0) {
        t = (gpt2_tokenizer *)gpt2__zalloc(sizeof *t);
        if (t) t->tok_off = (size_t *)gpt2__alloc(((size_t)head[0] + 1) * sizeof(size_t));
        lens = (int *)gpt2__alloc((size_t)head[0] * sizeof(int));
        bytes = (unsigned char *)gpt2__alloc((size_t)head[1]);
        if (!t || !t->tok_off || !lens || !bytes)
            st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_generate: out of memory for a tokenizer of %lld ids", head[0]);
    }
    if ((st = gpt2__mpi_agree(comm, st))) goto done;
    if ((st = gpt2__mpi_rc(MPI_Bcast(lens, (int)head[0], MPI_INT, 0, comm), "MPI_Bcast of a tokenizer's lengths"))) goto done;
    if ((st = gpt2__mpi_bcast_bytes(comm, bytes, (size_t)head[1], "MPI_Bcast of a tokenizer's bytes"))) goto done;
    if (rank != 0) {
        t->n_vocab = (int)head[0];
        t->tok_off[0] = 0;
        for (long long id = 0; id < head[0]; id++) t->tok_off[id + 1] = t->tok_off[id] + (size_t)lens[id];
        t->bytes = bytes;
        bytes = NULL;
        *made = t;
        t = NULL;
    }
done:
    GPT2_FREE(lens);
    GPT2_FREE(bytes);
    gpt2_tokenizer_free(t);
    return st;
}

/* Where the last gpt2_mpi_generate on this thread spent its time (seconds, this rank's view):
   total from entry to return, and the part inside the local gpt2_generate (for bench/bench_mpi). */
typedef struct gpt2__mpi_timing { double total, generate; } gpt2__mpi_timing;
static GPT2__TLS gpt2__mpi_timing gpt2__mpi_last;

GPT2_API gpt2_status gpt2_mpi_generate(MPI_Comm comm, gpt2_model *model, gpt2_request *reqs, int n,
                                       gpt2_token_fn on_token, void *user) {
    int rank = 0, size = 1;
    double t_entry = MPI_Wtime(), t_gen = 0.0;
    gpt2_status st = gpt2__mpi_running("gpt2_mpi_generate");
    if (!st) st = gpt2__mpi_rc(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    if (!st) st = gpt2__mpi_rc(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    if (st) return st;
    /* rank 0: the plan, every request's header and payload (in the plan's order), the distinct tokenizers of the
       requests with stop strings, and the gathered results */
    gpt2__mpi_plan plan;
    memset(&plan, 0, sizeof plan);
    long long *cost = NULL, *words = NULL, *res = NULL;
    gpt2__mpi_req *all_hdr = NULL;
    uint32_t *all_words = NULL, *all_res = NULL;
    const gpt2_tokenizer **toks = NULL;
    int *send = NULL; /* [size][3]: per rank its requests, payload words and the tokenizers' count */
    /* this rank's share: mine = [requests, payload words, tokenizers]; its requests rebuilt from the words, with
       buffers for their outputs, and its results packed */
    int mine[3] = {0, 0, 0}, n_res = 0;
    gpt2__mpi_req *hdr = NULL;
    uint32_t *words_in = NULL, *res_out = NULL;
    gpt2_request *local = NULL;
    gpt2_tokenizer **made = NULL;
    int *ints = NULL, *out = NULL, *top_ids = NULL;
    float *floats = NULL, *lp = NULL, *top_lp = NULL;
    char *chars = NULL;
    const char **strs = NULL;
    gpt2__mpi_relay relay;

    if (!model) st = gpt2__fail(GPT2_ERR_ARG, "gpt2_mpi_generate: model is NULL");
    if (!st && rank == 0) st = gpt2__mpi_check_requests(model, reqs, n);
    if (!st && rank == 0) {
        cost = (long long *)gpt2__zalloc((size_t)n * 3 * sizeof(long long));
        all_hdr = (gpt2__mpi_req *)gpt2__zalloc((size_t)n * sizeof *all_hdr);
        toks = (const gpt2_tokenizer **)gpt2__alloc((size_t)n * sizeof *toks);
        send = (int *)gpt2__zalloc((size_t)size * 3 * sizeof(int));
        if (!cost || !all_hdr || !toks || !send) st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_generate: out of memory for %d requests", n);
    }
    if (!st && rank == 0) {
        int n_tok = 0;
        words = cost + n; res = cost + 2 * n;
        for (int i = 0; i < n; i++) { /* headers in rank 0's order for now */
            const gpt2_request *r = &reqs[i];
            gpt2__mpi_req *h = &all_hdr[i];
            long long stop_bytes = 0;
            for (int k = 0; k < r->n_stop_strings; k++) stop_bytes += (long long)strlen(r->stop_strings[k]) + 1;
            if (stop_bytes > INT_MAX) { st = gpt2__fail(GPT2_ERR_ARG, "request %d: %lld bytes of stop strings", i, stop_bytes); break; }
            h->index = i; h->prompt_len = r->prompt_len; h->max_new_tokens = r->max_new_tokens; h->stop_token = r->stop_token;
            h->n_stop_ids = r->n_stop_ids; h->n_stop_strings = r->n_stop_strings; h->stop_bytes = (int)stop_bytes;
            h->tokenizer = -1;
            if (r->n_stop_strings > 0) {
                int t = 0;
                while (t < n_tok && toks[t] != r->tokenizer) t++;
                if (t == n_tok) toks[n_tok++] = r->tokenizer;
                h->tokenizer = t;
            }
            h->logprobs = r->out_logprobs != NULL; h->top_logprobs = r->top_logprobs;
            h->sampling = r->sampling; h->sampling.bias_ids = NULL; h->sampling.bias = NULL;
            cost[i] = (long long)r->prompt_len + r->max_new_tokens;
            words[i] = gpt2__mpi_req_words(h);
            res[i] = gpt2__mpi_result_words(h, r->max_new_tokens);
        }
        if (!st) st = gpt2__mpi_plan_make(&plan, n, size, cost, words, res, sizeof(gpt2__mpi_req), "gpt2_mpi_generate");
        if (!st) {
            long long total = 0;
            for (int i = 0; i < n; i++) total += words[i];
            all_words = (uint32_t *)gpt2__alloc((size_t)total * sizeof(uint32_t));
            gpt2__mpi_req *grouped = (gpt2__mpi_req *)gpt2__alloc((size_t)n * sizeof *grouped);
            if (!all_words || !grouped) st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_generate: out of memory for %lld words of requests", total);
            uint32_t *w = all_words;
            for (int k = 0; !st && k < n; k++) {
                const int i = plan.order[k];
                const gpt2_request *r = &reqs[i];
                grouped[k] = all_hdr[i];
                w = gpt2__mpi_put(w, r->prompt, (size_t)r->prompt_len * sizeof(int));
                w = gpt2__mpi_put(w, r->sampling.bias_ids, (size_t)r->sampling.n_bias * sizeof(int));
                w = gpt2__mpi_put(w, r->sampling.bias, (size_t)r->sampling.n_bias * sizeof(float));
                w = gpt2__mpi_put(w, r->stop_ids, (size_t)r->n_stop_ids * sizeof(int));
                const size_t stop_words = gpt2__mpi_words((size_t)all_hdr[i].stop_bytes);
                char *c = (char *)w;
                for (int s = 0; s < r->n_stop_strings; s++) {
                    const size_t l = strlen(r->stop_strings[s]) + 1;
                    memcpy(c, r->stop_strings[s], l);
                    c += l;
                }
                memset(c, 0, stop_words * 4 - (size_t)all_hdr[i].stop_bytes);
                w += stop_words;
            }
            if (grouped) { GPT2_FREE(all_hdr); all_hdr = grouped; }
        }
        for (int r = 0; !st && r < size; r++) {
            send[3 * r] = plan.req_count[r]; send[3 * r + 1] = plan.word_count[r]; send[3 * r + 2] = n_tok;
        }
    }
    if ((st = gpt2__mpi_agree(comm, st))) goto done;

    /* send each rank its share */
    if ((st = gpt2__mpi_rc(MPI_Scatter(send, 3, MPI_INT, mine, 3, MPI_INT, 0, comm), "MPI_Scatter"))) goto done;
    hdr = (gpt2__mpi_req *)gpt2__alloc((size_t)mine[0] * sizeof *hdr);
    words_in = (uint32_t *)gpt2__alloc((size_t)mine[1] * sizeof(uint32_t));
    made = (gpt2_tokenizer **)gpt2__zalloc((size_t)mine[2] * sizeof *made);
    if (!hdr || !words_in || !made) st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_generate: out of memory for %d requests", mine[0]);
    if ((st = gpt2__mpi_agree(comm, st))) goto done;
    if ((st = gpt2__mpi_rc(MPI_Scatterv(all_hdr, plan.hdr_bytes, plan.hdr_displ, MPI_BYTE, hdr, mine[0] * (int)sizeof *hdr,
                                        MPI_BYTE, 0, comm), "MPI_Scatterv of the requests"))) goto done;
    if ((st = gpt2__mpi_rc(MPI_Scatterv(all_words, plan.word_count, plan.word_displ, MPI_UINT32_T, words_in, mine[1],
                                        MPI_UINT32_T, 0, comm), "MPI_Scatterv of the prompts and lists"))) goto done;
    /* the stop strings' tokenizers, only when some request has stop strings */
    for (int t = 0; t < mine[2]; t++)
        if ((st = gpt2__mpi_share_tokenizer(comm, rank, rank == 0 ? toks[t] : NULL, model->cfg.n_vocab, &made[t]))) goto done;

    /* this rank's requests, rebuilt, and checked against its own model (options such as max_seq may differ per rank,
       and the backend may refuse a control) */
    {
        long long n_ints = 0, n_floats = 0, n_chars = 0, n_strs = 0, n_out = 0, n_lp = 0, n_top = 0, n_words = 0;
        for (int j = 0; j < mine[0]; j++) {
            const gpt2__mpi_req *h = &hdr[j];
            n_ints += (long long)h->prompt_len + h->sampling.n_bias + h->n_stop_ids;
            n_floats += h->sampling.n_bias; n_chars += h->stop_bytes; n_strs += h->n_stop_strings;
            n_out += h->max_new_tokens; n_lp += h->logprobs ? h->max_new_tokens : 0;
            n_top += (long long)h->max_new_tokens * h->top_logprobs;
            n_words += gpt2__mpi_result_words(h, h->max_new_tokens);
        }
        local = (gpt2_request *)gpt2__zalloc((size_t)mine[0] * sizeof *local);
        ints = (int *)gpt2__alloc((size_t)n_ints * sizeof(int));
        floats = (float *)gpt2__alloc((size_t)n_floats * sizeof(float));
        chars = (char *)gpt2__alloc((size_t)n_chars);
        strs = (const char **)gpt2__alloc((size_t)n_strs * sizeof *strs);
        out = (int *)gpt2__alloc((size_t)n_out * sizeof(int));
        lp = (float *)gpt2__alloc((size_t)n_lp * sizeof(float));
        top_ids = (int *)gpt2__alloc((size_t)n_top * sizeof(int));
        top_lp = (float *)gpt2__alloc((size_t)n_top * sizeof(float));
        res_out = (uint32_t *)gpt2__alloc((size_t)n_words * sizeof(uint32_t));
        if (!local || !ints || !floats || !chars || !strs || !out || !lp || !top_ids || !top_lp || !res_out)
            st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_generate: out of memory for %d requests", mine[0]);
        const uint32_t *w = words_in;
        int *pi = ints, *po = out, *pt = top_ids;
        float *pf = floats, *pl = lp, *ptl = top_lp;
        char *pc = chars;
        const char **ps = strs;
        for (int j = 0; !st && j < mine[0]; j++) {
            const gpt2__mpi_req *h = &hdr[j];
            gpt2_request *r = &local[j];
            r->prompt_len = h->prompt_len; r->max_new_tokens = h->max_new_tokens; r->stop_token = h->stop_token;
            r->sampling = h->sampling;
            w = gpt2__mpi_get(w, pi, (size_t)h->prompt_len * sizeof(int)); r->prompt = pi; pi += h->prompt_len;
            w = gpt2__mpi_get(w, pi, (size_t)h->sampling.n_bias * sizeof(int)); r->sampling.bias_ids = pi; pi += h->sampling.n_bias;
            w = gpt2__mpi_get(w, pf, (size_t)h->sampling.n_bias * sizeof(float)); r->sampling.bias = pf; pf += h->sampling.n_bias;
            w = gpt2__mpi_get(w, pi, (size_t)h->n_stop_ids * sizeof(int)); r->stop_ids = pi; r->n_stop_ids = h->n_stop_ids;
            pi += h->n_stop_ids;
            w = gpt2__mpi_get(w, pc, (size_t)h->stop_bytes);
            r->stop_strings = ps; r->n_stop_strings = h->n_stop_strings;
            for (int s = 0; s < h->n_stop_strings; s++) { *ps++ = pc; pc += strlen(pc) + 1; }
            if (h->tokenizer >= 0) r->tokenizer = rank == 0 ? toks[h->tokenizer] : made[h->tokenizer];
            r->out = po; po += h->max_new_tokens;
            if (h->logprobs) { r->out_logprobs = pl; pl += h->max_new_tokens; }
            r->top_logprobs = h->top_logprobs;
            if (h->top_logprobs) {
                r->out_top_ids = pt; r->out_top_logprobs = ptl;
                pt += (size_t)h->max_new_tokens * h->top_logprobs; ptl += (size_t)h->max_new_tokens * h->top_logprobs;
            }
            if ((long)r->prompt_len + r->max_new_tokens > model->max_seq)
                st = gpt2__fail(GPT2_ERR_ARG, "request %d: prompt_len %d + max_new_tokens %d exceeds max_seq = %d",
                                h->index, r->prompt_len, r->max_new_tokens, model->max_seq);
            if (!st) st = gpt2__check_controls(model, r, h->index);
        }
    }
    if ((st = gpt2__mpi_agree(comm, st))) goto done;
    relay.fn = on_token; relay.user = user; relay.hdr = hdr;
    t_gen = MPI_Wtime();
    if (mine[0] > 0) st = gpt2_generate(model, local, mine[0], on_token ? gpt2__mpi_relay_token : NULL, &relay);
    t_gen = MPI_Wtime() - t_gen;
    if ((st = gpt2__mpi_agree(comm, st))) goto done;

    /* the results to rank 0: this rank's packed back to back, their sizes first */
    {
        uint32_t *w = res_out;
        for (int j = 0; j < mine[0]; j++) {
            const gpt2_request *r = &local[j];
            const int head[3] = {r->n_out, r->finish_reason, r->text_len};
            const size_t nt = (size_t)r->n_out * (size_t)r->top_logprobs;
            w = gpt2__mpi_put(w, head, sizeof head);
            w = gpt2__mpi_put(w, r->out, (size_t)r->n_out * sizeof(int));
            if (r->out_logprobs) w = gpt2__mpi_put(w, r->out_logprobs, (size_t)r->n_out * sizeof(float));
            if (nt) {
                /* the alternatives of the n_out tokens: out_top_ids and out_top_logprobs are [max_new_tokens][top] */
                w = gpt2__mpi_put(w, r->out_top_ids, nt * sizeof(int));
                w = gpt2__mpi_put(w, r->out_top_logprobs, nt * sizeof(float));
            }
        }
        n_res = (int)(w - res_out);
    }
    if ((st = gpt2__mpi_rc(MPI_Gather(&n_res, 1, MPI_INT, plan.res_count, 1, MPI_INT, 0, comm), "MPI_Gather of the result sizes")))
        goto done;
    if (rank == 0) {
        long long total = 0;
        for (int r = 0; r < size; r++) { plan.res_displ[r] = (int)total; total += plan.res_count[r]; }
        all_res = (uint32_t *)gpt2__alloc((size_t)total * sizeof(uint32_t));
        if (!all_res) st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_generate: out of memory for %lld words of results", total);
    }
    if ((st = gpt2__mpi_agree(comm, st))) goto done;
    if ((st = gpt2__mpi_rc(MPI_Gatherv(res_out, n_res, MPI_UINT32_T, all_res, plan.res_count, plan.res_displ, MPI_UINT32_T, 0, comm),
                           "MPI_Gatherv of the results"))) goto done;
    if (rank == 0) {
        const uint32_t *w = all_res;
        for (int k = 0; k < n; k++) {
            gpt2_request *r = &reqs[plan.order[k]];
            int head[3];
            w = gpt2__mpi_get(w, head, sizeof head);
            r->n_out = head[0]; r->finish_reason = head[1]; r->text_len = head[2];
            const size_t nt = (size_t)r->n_out * (size_t)r->top_logprobs;
            w = gpt2__mpi_get(w, r->out, (size_t)r->n_out * sizeof(int));
            if (r->out_logprobs) w = gpt2__mpi_get(w, r->out_logprobs, (size_t)r->n_out * sizeof(float));
            if (nt) {
                w = gpt2__mpi_get(w, r->out_top_ids, nt * sizeof(int));
                w = gpt2__mpi_get(w, r->out_top_logprobs, nt * sizeof(float));
            }
        }
    }

done:
    gpt2__mpi_plan_free(&plan);
    GPT2_FREE(cost); GPT2_FREE(all_hdr); GPT2_FREE(all_words); GPT2_FREE(all_res); GPT2_FREE(toks); GPT2_FREE(send);
    for (int t = 0; made && t < mine[2]; t++) gpt2_tokenizer_free(made[t]);
    GPT2_FREE(made); GPT2_FREE(hdr); GPT2_FREE(words_in); GPT2_FREE(res_out); GPT2_FREE(local);
    GPT2_FREE(ints); GPT2_FREE(floats); GPT2_FREE(chars); GPT2_FREE((void *)strs);
    GPT2_FREE(out); GPT2_FREE(lp); GPT2_FREE(top_ids); GPT2_FREE(top_lp);
    gpt2__mpi_last.total = MPI_Wtime() - t_entry;
    gpt2__mpi_last.generate = t_gen;
    return st;
}

/* ---------------------------------------------------------------- scoring: split, run, gather */

/* A text as it travels to its rank (its tokens travel apart, in one array per rank). */
typedef struct gpt2__mpi_text {
    int index;               /* in rank 0's array */
    int n_tokens, n_context, stride;
    int logprobs, ranks;     /* the caller gave those buffers */
} gpt2__mpi_text;

/* A text's result words: sum_logprob (a double's bytes), n_scored, then its logprobs and ranks when asked for. */
static long long gpt2__mpi_text_result_words(const gpt2__mpi_text *h) {
    const long long n_scored = (long long)h->n_tokens - h->n_context;
    return 3 + n_scored * ((h->logprobs ? 1 : 0) + (h->ranks ? 1 : 0));
}

GPT2_API gpt2_status gpt2_mpi_score(MPI_Comm comm, gpt2_model *model, gpt2_score_request *reqs, int n) {
    int rank = 0, size = 1, L = 0;
    gpt2_status st = gpt2__mpi_running("gpt2_mpi_score");
    if (!st) st = gpt2__mpi_rc(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    if (!st) st = gpt2__mpi_rc(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    if (st) return st;
    /* rank 0: the plan, the texts' headers and tokens in its order, the gathered results */
    gpt2__mpi_plan plan;
    memset(&plan, 0, sizeof plan);
    long long *cost = NULL, *words = NULL, *res = NULL;
    gpt2__mpi_text *all_hdr = NULL;
    int *all_tokens = NULL;
    uint32_t *all_res = NULL;
    int *send = NULL; /* [size][3]: per rank its texts, tokens, result words */
    /* this rank's share: mine = [texts, tokens, result words] */
    int mine[3] = {0, 0, 0};
    gpt2__mpi_text *hdr = NULL;
    uint32_t *res_out = NULL;
    gpt2_score_request *local = NULL;
    int *tokens = NULL, *ranks = NULL;
    float *lps = NULL;

    if (!model) st = gpt2__fail(GPT2_ERR_ARG, "gpt2_mpi_score: model is NULL");
    else L = model->max_seq;
    /* the windows are max_seq long: every rank must cut them as rank 0 does */
    if ((st = gpt2__mpi_agree(comm, st))) return st;
    {
        int L0 = L;
        if ((st = gpt2__mpi_rc(MPI_Bcast(&L0, 1, MPI_INT, 0, comm), "MPI_Bcast of max_seq"))) return st;
        if (L != L0)
            st = gpt2__fail(GPT2_ERR_ARG, "gpt2_mpi_score: this rank's model has max_seq = %d, rank 0's %d (the windows "
                            "would differ): load every rank with the same max_seq", L, L0);
    }
    if (!st && rank == 0) st = gpt2__score_check(model, reqs, n);
    if (!st && rank == 0) {
        cost = (long long *)gpt2__zalloc((size_t)n * 3 * sizeof(long long));
        all_hdr = (gpt2__mpi_text *)gpt2__alloc((size_t)n * sizeof *all_hdr);
        send = (int *)gpt2__zalloc((size_t)size * 3 * sizeof(int));
        if (!cost || !all_hdr || !send) st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_score: out of memory for %d texts", n);
    }
    if (!st && rank == 0) {
        words = cost + n; res = cost + 2 * n;
        for (int i = 0; i < n; i++) { /* headers in rank 0's order for now */
            gpt2__mpi_text *h = &all_hdr[i];
            h->index = i; h->n_tokens = reqs[i].n_tokens; h->n_context = reqs[i].n_context; h->stride = reqs[i].stride;
            h->logprobs = reqs[i].logprobs != NULL; h->ranks = reqs[i].ranks != NULL;
            cost[i] = reqs[i].n_tokens;
            words[i] = reqs[i].n_tokens;
            res[i] = gpt2__mpi_text_result_words(h);
        }
        st = gpt2__mpi_plan_make(&plan, n, size, cost, words, res, sizeof(gpt2__mpi_text), "gpt2_mpi_score");
        if (!st) {
            long long total = 0, total_res = 0;
            for (int i = 0; i < n; i++) { total += words[i]; total_res += res[i]; }
            all_tokens = (int *)gpt2__alloc((size_t)total * sizeof(int));
            all_res = (uint32_t *)gpt2__alloc((size_t)total_res * sizeof(uint32_t));
            gpt2__mpi_text *grouped = (gpt2__mpi_text *)gpt2__alloc((size_t)n * sizeof *grouped);
            if (!all_tokens || !all_res || !grouped)
                st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_score: out of memory for %lld tokens", total);
            for (int k = 0, t = 0; !st && k < n; k++) {
                const gpt2_score_request *r = &reqs[plan.order[k]];
                grouped[k] = all_hdr[plan.order[k]];
                memcpy(all_tokens + t, r->tokens, (size_t)r->n_tokens * sizeof(int));
                t += r->n_tokens;
            }
            if (grouped) { GPT2_FREE(all_hdr); all_hdr = grouped; }
        }
        for (int r = 0; !st && r < size; r++) {
            send[3 * r] = plan.req_count[r]; send[3 * r + 1] = plan.word_count[r]; send[3 * r + 2] = plan.res_count[r];
        }
    }
    if ((st = gpt2__mpi_agree(comm, st))) goto done;

    /* send each rank its share */
    if ((st = gpt2__mpi_rc(MPI_Scatter(send, 3, MPI_INT, mine, 3, MPI_INT, 0, comm), "MPI_Scatter"))) goto done;
    {
        hdr = (gpt2__mpi_text *)gpt2__alloc((size_t)mine[0] * sizeof *hdr);
        local = (gpt2_score_request *)gpt2__zalloc((size_t)mine[0] * sizeof *local);
        tokens = (int *)gpt2__alloc((size_t)mine[1] * sizeof(int));
        res_out = (uint32_t *)gpt2__alloc((size_t)mine[2] * sizeof(uint32_t));
        /* at most mine[1] tokens are scored here */
        lps = (float *)gpt2__alloc((size_t)mine[1] * sizeof(float));
        ranks = (int *)gpt2__alloc((size_t)mine[1] * sizeof(int));
        if (!hdr || !local || !tokens || !res_out || !lps || !ranks)
            st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_score: out of memory for %d texts of %d tokens", mine[0], mine[1]);
    }
    if ((st = gpt2__mpi_agree(comm, st))) goto done;
    if ((st = gpt2__mpi_rc(MPI_Scatterv(all_hdr, plan.hdr_bytes, plan.hdr_displ, MPI_BYTE, hdr, mine[0] * (int)sizeof *hdr,
                                        MPI_BYTE, 0, comm), "MPI_Scatterv of the texts"))) goto done;
    if ((st = gpt2__mpi_rc(MPI_Scatterv(all_tokens, plan.word_count, plan.word_displ, MPI_INT, tokens, mine[1], MPI_INT, 0, comm),
                           "MPI_Scatterv of the tokens"))) goto done;
    for (int j = 0, t = 0, o = 0; j < mine[0]; j++) {
        gpt2_score_request *r = &local[j];
        r->tokens = tokens + t; r->n_tokens = hdr[j].n_tokens; r->n_context = hdr[j].n_context; r->stride = hdr[j].stride;
        if (hdr[j].logprobs) r->logprobs = lps + o;
        if (hdr[j].ranks) r->ranks = ranks + o;
        t += hdr[j].n_tokens;
        o += hdr[j].n_tokens - hdr[j].n_context;
    }
    if (mine[0] > 0) st = gpt2_score(model, local, mine[0]);
    if ((st = gpt2__mpi_agree(comm, st))) goto done;

    /* the results to rank 0, packed back to back in the plan's order */
    {
        uint32_t *w = res_out;
        for (int j = 0; j < mine[0]; j++) {
            const gpt2_score_request *r = &local[j];
            w = gpt2__mpi_put(w, &r->sum_logprob, sizeof(double));
            w = gpt2__mpi_put(w, &r->n_scored, sizeof(int));
            if (r->logprobs) w = gpt2__mpi_put(w, r->logprobs, (size_t)r->n_scored * sizeof(float));
            if (r->ranks) w = gpt2__mpi_put(w, r->ranks, (size_t)r->n_scored * sizeof(int));
        }
    }
    if ((st = gpt2__mpi_rc(MPI_Gatherv(res_out, mine[2], MPI_UINT32_T, all_res, plan.res_count, plan.res_displ, MPI_UINT32_T, 0, comm),
                           "MPI_Gatherv of the scores"))) goto done;
    if (rank == 0) {
        const uint32_t *w = all_res;
        for (int k = 0; k < n; k++) {
            gpt2_score_request *r = &reqs[plan.order[k]];
            w = gpt2__mpi_get(w, &r->sum_logprob, sizeof(double));
            w = gpt2__mpi_get(w, &r->n_scored, sizeof(int));
            if (r->logprobs) w = gpt2__mpi_get(w, r->logprobs, (size_t)r->n_scored * sizeof(float));
            if (r->ranks) w = gpt2__mpi_get(w, r->ranks, (size_t)r->n_scored * sizeof(int));
        }
    }

done:
    gpt2__mpi_plan_free(&plan);
    GPT2_FREE(cost); GPT2_FREE(all_hdr); GPT2_FREE(all_tokens); GPT2_FREE(all_res); GPT2_FREE(send);
    GPT2_FREE(hdr); GPT2_FREE(res_out); GPT2_FREE(local); GPT2_FREE(tokens); GPT2_FREE(lps); GPT2_FREE(ranks);
    return st;
}

#endif /* GPT2_MPI_IMPLEMENTATION_DONE */
#endif /* GPT2_MPI_IMPLEMENTATION */
