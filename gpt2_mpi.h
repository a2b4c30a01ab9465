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
                             generated there with gpt2_generate and gathered back into rank 0's
                             reqs[i].out / reqs[i].n_out in the original order
   All three are collective: every rank of the communicator calls them, in the same order.
   Outputs equal a single-process gpt2_generate of the same requests for any rank count (each request's
   tokens depend only on its prompt, parameters and seed), including more ranks than requests.
   on_token runs on the rank that generates the request and gets the request's index in rank 0's array.

   Errors: a failure on any rank (unreadable file, bad request, out of memory, device) is returned on
   every rank as the same status, and gpt2_last_error() reads "rank R of N: why" everywhere; nobody
   hangs. (Failures inside MPI itself follow the communicator's MPI error handler: by default MPI
   aborts the job.) Ranks must run the same build (requests travel as raw bytes).

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
static gpt2_status gpt2__mpi_bcast_bytes(MPI_Comm comm, void *buf, size_t n) {
    unsigned char *p = (unsigned char *)buf;
    while (n > 0) {
        int piece = n > ((size_t)1 << 30) ? 1 << 30 : (int)n;
        gpt2_status st = gpt2__mpi_rc(MPI_Bcast(p, piece, MPI_BYTE, 0, comm), "MPI_Bcast of the model bytes");
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
    st = gpt2__mpi_bcast_bytes(comm, cfg_text, cfg_len);
    if (!st && senders != MPI_COMM_NULL) st = gpt2__mpi_bcast_bytes(senders, st_data, st_len);
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

/* ---------------------------------------------------------------- generation: split, run, gather */

/* A request as it travels to its rank: everything but the pointers. */
typedef struct gpt2__mpi_req {
    int index;                       /* in rank 0's array */
    int prompt_len, max_new_tokens, stop_token;
    gpt2_sampling sampling;
} gpt2__mpi_req;

typedef struct gpt2__mpi_cost { long long cost; int index; } gpt2__mpi_cost;

/* most expensive first; equal costs in index order (so the plan is the same on every run) */
static int gpt2__mpi_cost_cmp(const void *a, const void *b) {
    const gpt2__mpi_cost *x = (const gpt2__mpi_cost *)a, *y = (const gpt2__mpi_cost *)b;
    if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* on_token on the generating rank, with the request's index in rank 0's array */
typedef struct gpt2__mpi_relay { gpt2_token_fn fn; void *user; const gpt2__mpi_req *hdr; } gpt2__mpi_relay;

static int gpt2__mpi_relay_token(void *user, int request, int token) {
    gpt2__mpi_relay *r = (gpt2__mpi_relay *)user;
    return r->fn(r->user, r->hdr[request].index, token);
}

/* Rank 0: checks the requests as gpt2_generate does (naming global indices) and the totals MPI's int
   counts must hold. The max_seq check is repeated on each rank against its own model. */
static gpt2_status gpt2__mpi_check_requests(const gpt2_model *m, const gpt2_request *reqs, int n) {
    if (n < 0 || (n > 0 && !reqs)) return gpt2__fail(GPT2_ERR_ARG, "gpt2_mpi_generate: %d requests at %p", n, (const void *)reqs);
    long long prompt_total = 0, out_total = 0;
    for (int i = 0; i < n; i++) {
        const gpt2_request *r = &reqs[i];
        if (!r->prompt || r->prompt_len < 1)
            return gpt2__fail(GPT2_ERR_ARG, "request %d: the prompt is empty (at least one token, e.g. 50256, is needed)", i);
        if (r->max_new_tokens < 0) return gpt2__fail(GPT2_ERR_ARG, "request %d: max_new_tokens = %d is negative", i, r->max_new_tokens);
        if (r->max_new_tokens > 0 && !r->out) return gpt2__fail(GPT2_ERR_ARG, "request %d: out is NULL", i);
        for (int t = 0; t < r->prompt_len; t++)
            if (r->prompt[t] < 0 || r->prompt[t] >= m->cfg.n_vocab)
                return gpt2__fail(GPT2_ERR_ARG, "request %d: prompt[%d] = %d is not a token id (vocabulary 0..%d)",
                                  i, t, r->prompt[t], m->cfg.n_vocab - 1);
        prompt_total += r->prompt_len;
        out_total += r->max_new_tokens;
    }
    if (prompt_total > INT_MAX || out_total > INT_MAX || (long long)n * (long long)sizeof(gpt2__mpi_req) > INT_MAX)
        return gpt2__fail(GPT2_ERR_ARG, "gpt2_mpi_generate: %d requests with %lld prompt and %lld new tokens are more than one "
                          "call can send (2^31 of each); split them into several calls", n, prompt_total, out_total);
    return GPT2_OK;
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
    /* rank 0's plan. Per rank: plan [requests, prompt tokens, room for new tokens] and the counts and
       displacements of the scatters and gathers, all in one allocation of 11 ints per rank. Requests
       travel grouped by rank, each group in the order it was assigned (longest first). */
    int *counts = NULL, *plan = NULL, *hdr_bytes = NULL, *hdr_displ = NULL, *prompt_count = NULL, *prompt_displ = NULL;
    int *req_count = NULL, *req_displ = NULL, *out_count = NULL, *out_displ = NULL;
    gpt2__mpi_req *all_hdr = NULL;   /* [n] grouped by rank */
    int *all_prompt = NULL;          /* the prompts, in all_hdr's order */
    int *all_n_out = NULL;           /* [n] gathered output lengths, in all_hdr's order */
    int *all_out = NULL;             /* the gathered outputs, in all_hdr's order */
    int *owner = NULL;               /* [n] the rank each request goes to */
    long long *load = NULL;          /* [size] cost assigned to each rank */
    gpt2__mpi_cost *order = NULL;
    /* this rank's shard: mine = [requests, prompt tokens, room for new tokens] */
    int mine[3] = {0, 0, 0}, packed = 0;
    gpt2__mpi_req *hdr = NULL;
    int *prompt = NULL, *out = NULL, *n_out = NULL;
    gpt2_request *local = NULL;
    gpt2__mpi_relay relay;

    if (!model) st = gpt2__fail(GPT2_ERR_ARG, "gpt2_mpi_generate: model is NULL");
    if (!st && rank == 0) st = gpt2__mpi_check_requests(model, reqs, n);
    if (!st && rank == 0) {
        counts = (int *)gpt2__zalloc((size_t)size * 11 * sizeof(int));
        load = (long long *)gpt2__zalloc((size_t)size * sizeof(long long));
        order = (gpt2__mpi_cost *)gpt2__alloc((size_t)n * sizeof *order);
        owner = (int *)gpt2__alloc((size_t)n * sizeof(int));
        all_hdr = (gpt2__mpi_req *)gpt2__alloc((size_t)n * sizeof *all_hdr);
        all_n_out = (int *)gpt2__alloc((size_t)n * sizeof(int));
        if (!counts || !load || !order || !owner || !all_hdr || !all_n_out)
            st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_generate: out of memory planning %d requests", n);
    }
    if (!st && rank == 0) {
        plan = counts; hdr_bytes = counts + 3 * size; hdr_displ = counts + 4 * size;
        prompt_count = counts + 5 * size; prompt_displ = counts + 6 * size; req_count = counts + 7 * size;
        req_displ = counts + 8 * size; out_count = counts + 9 * size; out_displ = counts + 10 * size;
        /* longest first onto the least-loaded rank (the lowest among equals) */
        for (int i = 0; i < n; i++) { order[i].cost = (long long)reqs[i].prompt_len + reqs[i].max_new_tokens; order[i].index = i; }
        qsort(order, (size_t)n, sizeof *order, gpt2__mpi_cost_cmp);
        for (int k = 0; k < n; k++) {
            int i = order[k].index, best = 0;
            for (int r = 1; r < size; r++) if (load[r] < load[best]) best = r;
            load[best] += order[k].cost;
            owner[i] = best;
            plan[3 * best] += 1;
            plan[3 * best + 1] += reqs[i].prompt_len;
            plan[3 * best + 2] += reqs[i].max_new_tokens;
        }
        int req_total = 0, prompt_total = 0;
        for (int r = 0; r < size; r++) {
            req_count[r] = plan[3 * r]; req_displ[r] = req_total; req_total += plan[3 * r];
            hdr_bytes[r] = req_count[r] * (int)sizeof(gpt2__mpi_req); hdr_displ[r] = req_displ[r] * (int)sizeof(gpt2__mpi_req);
            prompt_count[r] = plan[3 * r + 1]; prompt_displ[r] = prompt_total; prompt_total += plan[3 * r + 1];
        }
        all_prompt = (int *)gpt2__alloc((size_t)prompt_total * sizeof(int));
        long long room = 0;
        for (int i = 0; i < n; i++) room += reqs[i].max_new_tokens;
        all_out = (int *)gpt2__alloc((size_t)room * sizeof(int));
        if (!all_prompt || !all_out)
            st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_generate: out of memory for %d prompt and %lld new tokens", prompt_total, room);
        /* fill each rank's group; req_displ / prompt_displ serve as the cursors (and are restored after) */
        for (int k = 0; !st && k < n; k++) {
            int i = order[k].index, r = owner[i];
            gpt2__mpi_req *h = &all_hdr[req_displ[r]++];
            h->index = i; h->prompt_len = reqs[i].prompt_len; h->max_new_tokens = reqs[i].max_new_tokens;
            h->stop_token = reqs[i].stop_token; h->sampling = reqs[i].sampling;
            memcpy(all_prompt + prompt_displ[r], reqs[i].prompt, (size_t)reqs[i].prompt_len * sizeof(int));
            prompt_displ[r] += reqs[i].prompt_len;
        }
        for (int r = 0; !st && r < size; r++) { req_displ[r] -= req_count[r]; prompt_displ[r] -= prompt_count[r]; }
        for (int i = 0; i < n; i++) reqs[i].n_out = 0;
    }
    if ((st = gpt2__mpi_agree(comm, st))) goto done;

    /* send each rank its shard */
    if ((st = gpt2__mpi_rc(MPI_Scatter(plan, 3, MPI_INT, mine, 3, MPI_INT, 0, comm), "MPI_Scatter"))) goto done;
    hdr = (gpt2__mpi_req *)gpt2__alloc((size_t)mine[0] * sizeof *hdr);
    local = (gpt2_request *)gpt2__zalloc((size_t)mine[0] * sizeof *local);
    prompt = (int *)gpt2__alloc((size_t)mine[1] * sizeof(int));
    out = (int *)gpt2__alloc((size_t)mine[2] * sizeof(int));
    n_out = (int *)gpt2__alloc((size_t)mine[0] * sizeof(int));
    if (!hdr || !local || !prompt || !out || !n_out)
        st = gpt2__fail(GPT2_ERR_OOM, "gpt2_mpi_generate: out of memory for %d requests", mine[0]);
    if ((st = gpt2__mpi_agree(comm, st))) goto done;
    if ((st = gpt2__mpi_rc(MPI_Scatterv(all_hdr, hdr_bytes, hdr_displ, MPI_BYTE, hdr, mine[0] * (int)sizeof *hdr, MPI_BYTE,
                                        0, comm), "MPI_Scatterv of the requests"))) goto done;
    if ((st = gpt2__mpi_rc(MPI_Scatterv(all_prompt, prompt_count, prompt_displ, MPI_INT, prompt, mine[1], MPI_INT, 0, comm),
                           "MPI_Scatterv of the prompts"))) goto done;

    /* this rank's requests, checked against its own model (options such as max_seq may differ per rank) */
    for (int j = 0, p = 0, o = 0; j < mine[0]; j++) {
        gpt2_request *r = &local[j];
        r->prompt = prompt + p; r->prompt_len = hdr[j].prompt_len;
        r->max_new_tokens = hdr[j].max_new_tokens; r->stop_token = hdr[j].stop_token;
        r->sampling = hdr[j].sampling; r->out = out + o;
        p += r->prompt_len;
        o += r->max_new_tokens;
        if (!st && (long)r->prompt_len + r->max_new_tokens > model->max_seq)
            st = gpt2__fail(GPT2_ERR_ARG, "request %d: prompt_len %d + max_new_tokens %d exceeds max_seq = %d",
                            hdr[j].index, r->prompt_len, r->max_new_tokens, model->max_seq);
    }
    if ((st = gpt2__mpi_agree(comm, st))) goto done;
    relay.fn = on_token; relay.user = user; relay.hdr = hdr;
    t_gen = MPI_Wtime();
    if (mine[0] > 0) st = gpt2_generate(model, local, mine[0], on_token ? gpt2__mpi_relay_token : NULL, &relay);
    t_gen = MPI_Wtime() - t_gen;
    if ((st = gpt2__mpi_agree(comm, st))) goto done;

    /* gather the outputs: how many tokens each request made, then the tokens packed back to back */
    for (int j = 0; j < mine[0]; j++) {
        n_out[j] = local[j].n_out;
        memmove(out + packed, local[j].out, (size_t)n_out[j] * sizeof(int));
        packed += n_out[j];
    }
    if ((st = gpt2__mpi_rc(MPI_Gatherv(n_out, mine[0], MPI_INT, all_n_out, req_count, req_displ, MPI_INT, 0, comm),
                           "MPI_Gatherv of the output lengths"))) goto done;
    if (rank == 0)
        for (int r = 0, t = 0; r < size; r++) {
            out_count[r] = 0;
            for (int k = req_displ[r]; k < req_displ[r] + req_count[r]; k++) out_count[r] += all_n_out[k];
            out_displ[r] = t;
            t += out_count[r];
        }
    if ((st = gpt2__mpi_rc(MPI_Gatherv(out, packed, MPI_INT, all_out, out_count, out_displ, MPI_INT, 0, comm),
                           "MPI_Gatherv of the outputs"))) goto done;
    if (rank == 0)
        for (int k = 0, t = 0; k < n; k++) {
            gpt2_request *r = &reqs[all_hdr[k].index];
            r->n_out = all_n_out[k];
            if (r->n_out > 0) memcpy(r->out, all_out + t, (size_t)r->n_out * sizeof(int));
            t += r->n_out;
        }

done:
    GPT2_FREE(counts); GPT2_FREE(load); GPT2_FREE(order); GPT2_FREE(owner); GPT2_FREE(all_hdr);
    GPT2_FREE(all_prompt); GPT2_FREE(all_n_out); GPT2_FREE(all_out);
    GPT2_FREE(hdr); GPT2_FREE(local); GPT2_FREE(prompt); GPT2_FREE(out); GPT2_FREE(n_out);
    gpt2__mpi_last.total = MPI_Wtime() - t_entry;
    gpt2__mpi_last.generate = t_gen;
    return st;
}

#endif /* GPT2_MPI_IMPLEMENTATION_DONE */
#endif /* GPT2_MPI_IMPLEMENTATION */
