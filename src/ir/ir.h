/* The host IR: scalar expressions, tensor types, instructions, programs, and
 * the C builder API that the parser, the tests and embedders use. */
#ifndef HN_IR_H
#define HN_IR_H

#include <stdint.h>

#include "../base/collective.h"
#include "../base/dtype.h"
#include "../base/util.h"

#define HN_MAX_DIMS 8

typedef enum hn_form {
    HN_FORM_ALLOC,
    HN_FORM_FREE,
    HN_FORM_VIEW,
    HN_FORM_SELECT,
    HN_FORM_CHUNK,
    HN_FORM_TRANSPOSE,
    HN_FORM_LET,
    HN_FORM_CURRENT_STREAM,
    HN_FORM_STREAM,
    HN_FORM_STREAMREF,
    HN_FORM_BARE,
    HN_FORM_FOR,
    HN_FORM_IF,
    HN_FORM_COLL,
    HN_FORM_P2P,
    HN_FORM_GROUP,
    HN_FORM_WAIT,
    HN_FORM_COMPUTE,
    HN_FORM_PIPELINED,
} hn_form;

enum {
    HN_OPF_DEF = 1,   /* written `name = ...`: defines a variable */
    HN_OPF_COMM = 2,  /* a communication (may be named, waited on) */
    HN_OPF_REDOP = 4, /* takes `op sum|prod|max|min|avg` */
    HN_OPF_ROOT = 8,  /* takes `root expr` */
    HN_OPF_PIPE = 16, /* a pipelined statement: src/sched/lower.c lowers it */
    HN_OPF_EPS = 32,  /* takes `eps NUMBER` (kept in e[1]) */
    /* the strategies a pipelined statement offers (bit 8 + hn_strategy) */
    HN_OPF_SEQUENTIAL = 1 << 9,
    HN_OPF_RING = 1 << 10,
    HN_OPF_COLLECTIVE = 1 << 11,
    HN_OPF_BROADCAST = 1 << 12,
};

/* How a pipelined statement overlaps its communication and computation;
 * docs/SCHEDULER.md describes each. */
typedef enum hn_strategy {
    HN_STRAT_AUTO, /* chosen by the cost model (src/model/cost.c) */
    HN_STRAT_SEQUENTIAL,
    HN_STRAT_RING,
    HN_STRAT_COLLECTIVE,
    HN_STRAT_BROADCAST,
    HN_STRAT_COUNT
} hn_strategy;

#define HN_OPF_STRATEGY(s) (1 << (8 + (int)(s)))
const char *hn_strategy_name(hn_strategy s);

typedef enum hn_op {
#define HN_OP(e, kw, form, sig, flags) HN_OP_##e,
#include "ops.def"
    HN_OP_COUNT
} hn_op;

typedef struct hn_op_info {
    const char *keyword;
    hn_form form;
    const char *sig;
    int flags;
} hn_op_info;

extern const hn_op_info hn_op_table[HN_OP_COUNT];
/* -1 if the word is no instruction keyword. */
int hn_op_lookup(const char *word, int len);

/* ---- scalar expressions ---- */
typedef enum hn_expr_kind {
    HN_EX_INT,
    HN_EX_FLOAT, /* only as a whole numeric operand of a compute op */
    HN_EX_VAR,
    HN_EX_RANK,
    HN_EX_WORLD,
    HN_EX_NSTREAMS,
    HN_EX_NEG,
    HN_EX_NOT,
    HN_EX_BIN,
    HN_EX_MIN,
    HN_EX_MAX,
    HN_EX_FLOOR, /* floor(a): a, whose divisions floor on purpose (no remainder check) */
} hn_expr_kind;

typedef enum hn_binop {
    HN_B_OR,
    HN_B_AND,
    HN_B_EQ,
    HN_B_NE,
    HN_B_LT,
    HN_B_LE,
    HN_B_GT,
    HN_B_GE,
    HN_B_ADD,
    HN_B_SUB,
    HN_B_MUL,
    HN_B_DIV,
    HN_B_MOD,
} hn_binop;

typedef struct hn_expr hn_expr;
/* One node: 40 bytes (a program of millions of them stays small); a
 * parsed program's nodes lie in its pool, without malloc's headers. */
struct hn_expr {
    hn_expr *a, *b;
    union {
        int64_t ival; /* HN_EX_INT */
        double fval;  /* HN_EX_FLOAT */
    };
    int var;          /* HN_EX_VAR */
    int line, col;
    unsigned char kind; /* hn_expr_kind */
    unsigned char op;   /* hn_binop */
    unsigned char pooled; /* in a program's pool: hn_expr_free leaves it there;
                           * 2: a leaf shared by its uses (numbers, world,
                           * nstreams, rank where no message names it),
                           * positionless */
};

/* Values the evaluator needs; `vals` is indexed by variable slot. */
typedef struct hn_scalar_env {
    const int64_t *vals;
    int64_t rank, world, nstreams;
} hn_scalar_env;

hn_expr *hn_ex_int(int64_t v);
hn_expr *hn_ex_float(double v);
hn_expr *hn_ex_var(int var);
hn_expr *hn_ex_leaf(hn_expr_kind kind); /* rank, world, nstreams */
/* While parsing, the one node of the program's pool for rank, world or
 * nstreams, shared by its uses (positionless), else as hn_ex_leaf. */
hn_expr *hn_ex_leaf_shared(hn_expr_kind kind);
hn_expr *hn_ex_unary(hn_expr_kind kind, hn_expr *a); /* neg, not, floor */
hn_expr *hn_ex_bin(hn_binop op, hn_expr *a, hn_expr *b);
hn_expr *hn_ex_call(hn_expr_kind kind, hn_expr *a, hn_expr *b); /* min/max */
hn_expr *hn_expr_clone(const hn_expr *e);
void hn_expr_free(hn_expr *e);
int hn_expr_equal(const hn_expr *a, const hn_expr *b);
/* Binding strength of a binary operator (higher binds tighter). */
int hn_binop_prec(hn_binop op);
const char *hn_binop_text(hn_binop op);
/* Integer evaluation; floor division and modulo. On error writes a message
 * into err (size errlen) and returns HN_ERR_RUNTIME. */
hn_status_t hn_expr_eval(const hn_expr *e, const hn_scalar_env *env,
                         int64_t *out, char *err, int errlen);
/* The first division of an evaluation, outside floor(), that leaves a
 * remainder: the division, its operands and the floored quotient. */
typedef struct hn_inexact {
    const hn_expr *div; /* NULL: none */
    int64_t x, y, q;
} hn_inexact;
/* hn_expr_eval that also finds that division (shapes that must divide);
 * in one pass, in evaluation order (&& and || stop early). */
hn_status_t hn_expr_eval_exact(const hn_expr *e, const hn_scalar_env *env, int64_t *out, hn_inexact *inexact,
                               char *err, int errlen);
/* Numeric operand: a float literal, or an int expression as double. */
hn_status_t hn_expr_eval_num(const hn_expr *e, const hn_scalar_env *env,
                             double *out, char *err, int errlen);

/* ---- instructions ---- */
/* HN_VIA_AUTO: NCCL, the p2p rings or the latency path per instruction
 * from crossovers (src/model/cost.c); resolved when the instruction is
 * issued. HN_VIA_LL: the latency path (src/comm/ll/comm_ll.c). */
typedef enum hn_via {
    HN_VIA_DEFAULT,
    HN_VIA_NCCL,
    HN_VIA_P2P,
    HN_VIA_AUTO,
    HN_VIA_LL,
    HN_VIA_COUNT
} hn_via;
typedef enum hn_team_kind { HN_TEAM_ALL, HN_TEAM_LIST, HN_TEAM_RANGE } hn_team_kind;

const char *hn_redop_name(hn_redop r);
const char *hn_via_name(hn_via v);
/* The variant written after `via V` (a statement's algo): " get" (p2p
 * pull), " oneshot" or " twoshot" (ll), or "" (auto, and p2p's push: its
 * default, which `put` names). */
const char *hn_via_variant(hn_via v, hn_coll_algo algo);

/* A tensor operand: a variable, optionally indexed `t[i][j]` (each index
 * selects along the leading axis). The indices are an array of exactly
 * nidx (at most HN_MAX_DIMS), NULL when none: most operands have none,
 * and an instruction holds up to six operands. */
typedef struct hn_tref {
    int var;
    int nidx;
    hn_expr **idx;
    int line, col;
} hn_tref;
/* Appends an index to t (taking e); -1 when out of memory (e freed). */
int hn_tref_push_idx(hn_tref *t, hn_expr *e);

/* The dimensions are an array of exactly ndim (at most HN_MAX_DIMS),
 * NULL when none. */
typedef struct hn_type {
    hn_dtype dtype;
    int ndim;
    hn_expr **shape;
} hn_type;
/* Appends a dimension to t (taking e); -1 when out of memory (e freed). */
int hn_type_push_dim(hn_type *t, hn_expr *e);

typedef struct hn_arg {
    int is_tensor;
    hn_tref t;
    hn_expr *e;
} hn_arg;

#define HN_MAX_ARGS 4 /* operands an instruction has in args */

typedef struct hn_instr hn_instr;

/* cap < 0: items (exactly n) lie in a program's pool; a push copies them
 * out first. */
typedef struct hn_block {
    hn_instr **items;
    int n, cap;
} hn_block;

/* Ints first, then the small enumerations as bytes, then the pointers:
 * no padding but 4 bytes, 192 bytes (a program of millions of
 * instructions). The parts come in tiers, so that a parsed instruction
 * lies in its program's pool at the size of its form (`pooled`): every
 * instruction has the first (up to e), most the second (a, args:
 * hn_instr_has_operands), stream operands and waits the third
 * (sref_index, sref_var, wait_var: hn_instr_has_streamref), a few the
 * fourth (type, b, team, nteam: hn_instr_has_all); one that is not in a pool has them all. A form reads
 * only its own parts (parse.c says which). */
struct hn_instr {
    int id;         /* program-wide, in print order */
    int line, col;  /* of the first token */
    int dst;        /* variable defined, or -1 */
    int origin;     /* generated by lowering: index into the program's origins, else -1 */
    unsigned char op;        /* hn_op */
    unsigned char nargs;     /* at most HN_MAX_ARGS */
    unsigned char pooled;    /* 0, or in a program's pool (hn_instr_free leaves it there), with
                              * its expressions and args (not its other arrays), at the size of
                              * tier HN_POOL_* */
    unsigned char redop;     /* hn_redop */
    unsigned char via;       /* hn_via */
    unsigned char algo;      /* hn_coll_algo of the via: a statement's variant (via p2p: auto, which
                              * pushes, or pull; via ll: auto, one-shot or two-shot); a pipelined
                              * statement's protocol (auto, push or pull) */
    unsigned char strategy;  /* hn_strategy: pipelined statements */
    unsigned char on_streams; /* `for ... on streams`: iterations go to stream(i % nstreams) */
    unsigned char team_kind; /* hn_team_kind */
    unsigned char else_if;   /* orelse is one `if`, written `else if` */
    hn_block body, orelse;
    hn_expr *e[3];  /* form-specific: see parse.c (pipelined: chunks, streams; NULL = auto) */
    /* the second tier */
    hn_tref a;      /* out / free target / view source / p2p buffer */
    hn_arg *args;   /* nargs of them (at most HN_MAX_ARGS), NULL when none; in the pool
                     * with a pooled instruction */
    /* the third tier */
    hn_expr *sref_index; /* ... or stream(expr) */
    int sref_var;   /* stream operand: a variable ... (or sref_index) */
    int wait_var;   /* `wait name`; -1 = the last communication */
    /* the fourth tier */
    hn_type type;   /* alloc type; view shape */
    hn_tref b;      /* collective input */
    hn_expr **team; /* list members, or range start, count[, stride] */
    int nteam;
};

/* hn_instr.pooled: the tier of the parts a pooled instruction has, each
 * with those of the tiers before it */
enum { HN_POOL_SHORT = 1, HN_POOL_OPERANDS = 2, HN_POOL_STREAMREF = 3, HN_POOL_ALL = 4 };
/* a and args */
static inline int hn_instr_has_operands(const hn_instr *in) { return in->pooled == 0 || in->pooled >= HN_POOL_OPERANDS; }
/* sref_index, sref_var and wait_var */
static inline int hn_instr_has_streamref(const hn_instr *in) { return in->pooled == 0 || in->pooled >= HN_POOL_STREAMREF; }
/* type, b, team and nteam */
static inline int hn_instr_has_all(const hn_instr *in) { return in->pooled == 0 || in->pooled >= HN_POOL_ALL; }

hn_instr *hn_instr_new(hn_op op, int line, int col);
/* Appends an operand (zeroed, t.var = -1) to in->args: it, or NULL when
 * out of memory, when in has HN_MAX_ARGS already, or no operands (a pooled
 * instruction of a short form), or is a parsed one (pooled) once its
 * program is built. Earlier pointers into in->args may move. */
hn_arg *hn_instr_push_arg(hn_instr *in);
void hn_instr_free(hn_instr *in);
int hn_block_push(hn_block *b, hn_instr *in);
/* Deep copies (NULL when out of memory); origin and ids are kept. */
hn_instr *hn_instr_clone(const hn_instr *in);
int hn_tref_clone(hn_tref *dst, const hn_tref *src);
int hn_type_clone(hn_type *dst, const hn_type *src);
void hn_block_free(hn_block *b);
void hn_tref_clear(hn_tref *t);
void hn_type_clear(hn_type *t);

/* ---- program ---- */
typedef struct hn_param {
    int var;
    hn_expr *value;
    int line, col;
} hn_param;

typedef struct hn_io {
    int var;
    hn_type type;    /* per-rank (local) shape */
    int shard_axis;  /* -1: replicated */
    int line, col;
} hn_io;

typedef struct hn_program {
    /* unique in the process: caches key on it, never on the address, which
     * a later program may reuse once this one is destroyed */
    uint64_t uid;
    char *filename;
    char **names;
    int nvars, names_cap;
    int *name_slots; /* open addressing over names: var + 1, 0 = empty (ir.c) */
    int name_slots_cap; /* a power of two, more than twice nvars; 0 = none yet */
    hn_param *params;
    int nparams, params_cap;
    hn_io *inputs;
    int ninputs, inputs_cap;
    hn_io *outputs;
    int noutputs, outputs_cap;
    hn_block body;
    int has_reference;
    hn_block reference;
    int ninstrs; /* ids 0..ninstrs-1 after hn_prog_finish */
    int has_wait; /* some `wait` may need a communication's event */
    int has_sched; /* pipelined statements or stream-parallel loops: lower before running */
    int has_world_allreduce; /* an allreduce of every rank: across nodes it may be lowered too */
    hn_instr **instrs; /* by id, after hn_prog_finish */
    /* a lowered program: the source statement each generated instruction
     * stands for, as text (hn_instr.origin indexes it), for messages */
    char **origins;
    int norigins, origins_cap;
    /* the parser's nodes (instructions, expressions, blocks' items, names
     * 0..npooled_names-1), freed at once with the program (ir.c) */
    struct hn_node_pool *pool;
    int npooled_names;
} hn_program;

hn_program *hn_prog_new(const char *filename);
void hn_prog_free(hn_program *p);
/* Slot of `name`, created if new; -1 when out of memory. */
int hn_prog_var(hn_program *p, const char *name, int len);
int hn_prog_find_var(const hn_program *p, const char *name);
/* Slot of name[0..len), or -1 if the program has no such variable. */
int hn_prog_lookup_var(const hn_program *p, const char *name, int len);
int hn_prog_add_param(hn_program *p, int var, hn_expr *value, int line, int col);
int hn_prog_add_io(hn_program *p, int is_output, int var, hn_type *type,
                   int shard_axis, int line, int col);
/* Appends an origin text; its index, or -1 when out of memory. */
int hn_prog_add_origin(hn_program *p, const char *text);
/* While building p on this thread (the parser): instructions, expressions
 * and names made here go to p's pool; hn_prog_pool_end stops that. -1
 * when out of memory. */
int hn_prog_pool_begin(hn_program *p);
void hn_prog_pool_end(hn_program *p);
/* Moves b's items into the pool being filled (hn_prog_pool_begin), exactly
 * n of them; nothing when none is. -1 when out of memory (b unchanged). */
int hn_block_seal(hn_block *b);
/* Numbers instructions and builds the id table; call once, when built. */
hn_status_t hn_prog_finish(hn_program *p);
/* Structural equality, ignoring source positions. */
int hn_prog_equal(const hn_program *a, const hn_program *b);
/* Index of an input/output named by var, or -1. */
int hn_prog_input_index(const hn_program *p, int var);
int hn_prog_output_index(const hn_program *p, int var);

#endif
