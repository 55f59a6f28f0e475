// What a Lua function's bytecode does with one of its arguments: whether it only reads that table's fields.
//
// A mounted store gives each plugin's `reduce` the dispatched action. A plugin that writes into its action (or hands
// it to code that may) must get a copy, so that what it writes reaches no other plugin; one whose code provably only
// reads the action's fields may share the dispatched table. "Provably" is read from the function's own bytecode, as
// `lua_dump` writes it (Lua 5.4's format, ldump.c): every instruction that names the argument's register must be a
// read of a field (`GETFIELD`, `GETI`, `GETTABLE` with it as the table), its length, its truth or a comparison with a
// constant. Anything else — a store into it, a copy of it into another register, an upvalue or a table, a call or a
// return that includes it, an operator whose metamethod could receive it, a nested function capturing it, an
// instruction this file does not know — answers "no", and the plugin gets its copy. The answer is conservative by
// construction: it may refuse a function that is harmless, never accept one that is not.
#include "clua_guard.h"
#include <stdlib.h>
#include <string.h>

/// Lua 5.4's opcodes, in lopcodes.h's order (the numbering is the dump format's, fixed within 5.4).
enum {
    OP_MOVE, OP_LOADI, OP_LOADF, OP_LOADK, OP_LOADKX, OP_LOADFALSE, OP_LFALSESKIP, OP_LOADTRUE, OP_LOADNIL,
    OP_GETUPVAL, OP_SETUPVAL, OP_GETTABUP, OP_GETTABLE, OP_GETI, OP_GETFIELD, OP_SETTABUP, OP_SETTABLE, OP_SETI,
    OP_SETFIELD, OP_NEWTABLE, OP_SELF, OP_ADDI, OP_ADDK, OP_SUBK, OP_MULK, OP_MODK, OP_POWK, OP_DIVK, OP_IDIVK,
    OP_BANDK, OP_BORK, OP_BXORK, OP_SHRI, OP_SHLI, OP_ADD, OP_SUB, OP_MUL, OP_MOD, OP_POW, OP_DIV, OP_IDIV, OP_BAND,
    OP_BOR, OP_BXOR, OP_SHL, OP_SHR, OP_MMBIN, OP_MMBINI, OP_MMBINK, OP_UNM, OP_BNOT, OP_NOT, OP_LEN, OP_CONCAT,
    OP_CLOSE, OP_TBC, OP_JMP, OP_EQ, OP_LT, OP_LE, OP_EQK, OP_EQI, OP_LTI, OP_LEI, OP_GTI, OP_GEI, OP_TEST,
    OP_TESTSET, OP_CALL, OP_TAILCALL, OP_RETURN, OP_RETURN0, OP_RETURN1, OP_FORLOOP, OP_FORPREP, OP_TFORPREP,
    OP_TFORCALL, OP_TFORLOOP, OP_SETLIST, OP_CLOSURE, OP_VARARG, OP_VARARGPREP, OP_EXTRAARG
};

/// A dump being read: `at` moves towards `end`; `failed` once anything did not fit the format.
typedef struct {
    const unsigned char *at, *end;
    int failed;
} Reader;

static const unsigned char *take(Reader *reader, size_t count) {
    if (reader->failed || (size_t)(reader->end - reader->at) < count) {
        reader->failed = 1;
        return NULL;
    }
    const unsigned char *start = reader->at;
    reader->at += count;
    return start;
}

/// ldump.c's `dumpSize`: seven bits a byte, most significant first, the last byte marked by its high bit.
static size_t size(Reader *reader) {
    size_t value = 0;
    for (int bytes = 0; bytes < 10; bytes++) {
        const unsigned char *byte = take(reader, 1);
        if (byte == NULL) return 0;
        value = (value << 7) | (*byte & 0x7F);
        if (*byte & 0x80) return value;
    }
    reader->failed = 1;
    return 0;
}

static void skip_string(Reader *reader) {
    size_t length = size(reader);
    if (length > 0) take(reader, length - 1);
}

/// One function of a dump, read whole (ldump.c's `dumpFunction`): what the analyses need of it. Pointers point into
/// the dump; the arrays are the reader's, valid while the visitor runs.
typedef struct {
    int parameters, vararg, lineDefined, depth;
    const unsigned char *code;
    size_t instructions;
    /// Where each string constant's bytes are, and how many (`SIZE_MAX` for a constant that is not a string).
    const unsigned char **constantText;
    size_t *constantLength;
    size_t constants;
    const unsigned char *upvalues; /* (instack, idx, kind) triples */
    size_t upvalueCount;
    /// Its nested functions' upvalue lists, in `CLOSURE`'s numbering.
    const unsigned char **childUpvalues;
    size_t *childUpvalueCounts;
    size_t children;
    /// Line information (empty in a stripped dump): a signed delta an instruction, -0x80 for "the next absolute line".
    const signed char *lineInfo;
    size_t lineInfoCount;
    size_t *absoluteLine, absoluteCount;
    /// Its upvalues' names (empty in a stripped dump).
    const unsigned char **upvalueName;
    size_t *upvalueNameLength, upvalueNames;
} Function;

/// What is done with each function read, nested ones before the function holding them.
typedef void (*Visit)(lua_State *L, const Function *function, void *context);

/// Allocates `count` zeroed elements of `size` bytes (one at least), or marks the reader failed.
static void *reader_array(Reader *reader, size_t count, size_t size) {
    void *array = calloc(count + 1, size);
    if (array == NULL) reader->failed = 1;
    return array;
}

static void free_function(Function *f) {
    free(f->constantText); free(f->constantLength);
    free(f->childUpvalues); free(f->childUpvalueCounts);
    free(f->absoluteLine);
    free(f->upvalueName); free(f->upvalueNameLength);
}

/// Reads one function and those nested in it, `depth` levels at most, handing each to `visit` once read whole;
/// tells the caller where the function's upvalue list is (its parent's `CLOSURE` reads it).
static void read_function(Reader *reader, lua_State *L, int depth, Visit visit, void *context,
                          const unsigned char **upvalues, size_t *upvalueCount) {
    if (depth > 256) { reader->failed = 1; return; }
    Function f = { 0 };
    f.depth = depth;
    skip_string(reader);                                 /* source */
    f.lineDefined = (int)size(reader);
    size(reader);                                        /* lastlinedefined */
    const unsigned char *header = take(reader, 3);       /* numparams, is_vararg, maxstacksize */
    if (header == NULL) return;
    f.parameters = header[0];
    f.vararg = header[1];
    f.instructions = size(reader);
    if (f.instructions > (size_t)(reader->end - reader->at) / 4) { reader->failed = 1; return; }
    f.code = take(reader, f.instructions * 4);
    f.constants = size(reader);
    if (f.constants > (size_t)(reader->end - reader->at)) { reader->failed = 1; return; }
    f.constantText = reader_array(reader, f.constants, sizeof(*f.constantText));
    f.constantLength = reader_array(reader, f.constants, sizeof(*f.constantLength));
    for (size_t i = 0; i < f.constants && !reader->failed; i++) {
        const unsigned char *tag = take(reader, 1);
        f.constantLength[i] = SIZE_MAX;
        if (tag == NULL) break;
        switch (*tag) {
        case 0: case 1: case 17: break;                  /* nil, false, true */
        case 3: case 19: take(reader, 8); break;         /* integer, float */
        case 4: case 20: {                               /* short and long strings */
            size_t length = size(reader);
            if (length == 0) { reader->failed = 1; break; }
            f.constantText[i] = take(reader, length - 1);
            f.constantLength[i] = length - 1;
            break;
        }
        default: reader->failed = 1;
        }
    }
    f.upvalueCount = reader->failed ? 0 : size(reader);
    if (f.upvalueCount > (size_t)(reader->end - reader->at) / 3) reader->failed = 1;
    else f.upvalues = take(reader, f.upvalueCount * 3);
    f.children = reader->failed ? 0 : size(reader);
    if (f.children > (size_t)(reader->end - reader->at)) { reader->failed = 1; f.children = 0; }
    f.childUpvalues = reader_array(reader, f.children, sizeof(*f.childUpvalues));
    f.childUpvalueCounts = reader_array(reader, f.children, sizeof(*f.childUpvalueCounts));
    for (size_t i = 0; i < f.children && !reader->failed; i++)
        read_function(reader, L, depth + 1, visit, context, &f.childUpvalues[i], &f.childUpvalueCounts[i]);
    if (!reader->failed) {
        f.lineInfoCount = size(reader);
        f.lineInfo = (const signed char *)take(reader, f.lineInfoCount);
        f.absoluteCount = size(reader);
        if (f.absoluteCount > (size_t)(reader->end - reader->at) / 2) { reader->failed = 1; f.absoluteCount = 0; }
        f.absoluteLine = reader_array(reader, f.absoluteCount, sizeof(*f.absoluteLine));
        for (size_t i = 0; i < f.absoluteCount && !reader->failed; i++) {
            size(reader);                                /* pc */
            f.absoluteLine[i] = size(reader);
        }
        size_t locals = reader->failed ? 0 : size(reader);
        for (size_t i = 0; i < locals && !reader->failed; i++) { skip_string(reader); size(reader); size(reader); }
        f.upvalueNames = reader->failed ? 0 : size(reader);
        if (f.upvalueNames > (size_t)(reader->end - reader->at)) { reader->failed = 1; f.upvalueNames = 0; }
        f.upvalueName = reader_array(reader, f.upvalueNames, sizeof(*f.upvalueName));
        f.upvalueNameLength = reader_array(reader, f.upvalueNames, sizeof(*f.upvalueNameLength));
        for (size_t i = 0; i < f.upvalueNames && !reader->failed; i++) {
            size_t length = size(reader);
            f.upvalueNameLength[i] = length > 0 ? length - 1 : 0;
            f.upvalueName[i] = length > 0 ? take(reader, length - 1) : NULL;
        }
    }
    // (A memory error raised by a visitor leaves this function's arrays and the dump behind: both analyses run once
    // per function of an app, when it loads or is checked.)
    if (!reader->failed && f.code != NULL) visit(L, &f, context);
    *upvalues = f.upvalues;
    *upvalueCount = f.upvalueCount;
    free_function(&f);
}

/// Whether the register range [first, first + count) holds `reg`; `count` < 0 means "to the top of the stack".
static int in_range(int reg, int first, int count) {
    return reg >= first && (count < 0 || reg < first + count);
}

/// What reading a field of the argument adds to the keys read (the table at `keys`, used as a set): the field's
/// name (`GETFIELD`'s string constant) or index (`GETI`'s); 0 when it cannot be named (then any field may be read).
static int note_key(lua_State *L, int keys, const Function *function, int op, int c) {
    if (op == OP_GETI) {
        lua_pushinteger(L, c);
    } else {
        if ((size_t)c >= function->constants || function->constantLength[c] == SIZE_MAX) return 0;
        lua_pushlstring(L, (const char *)function->constantText[c], function->constantLength[c]);
    }
    lua_pushboolean(L, 1);
    lua_rawset(L, keys);
    return 1;
}

/// Whether `function`'s code only reads the fields of register `reg` (see the file's comment); the keys it reads
/// are added to the set at `keys` while `*named` holds (cleared at a read whose key is not a constant).
static int reads_only(lua_State *L, const Function *function, int reg, int keys, int *named, int *varies) {
    for (size_t pc = 0; pc < function->instructions; pc++) {
        uint32_t instruction;
        memcpy(&instruction, function->code + 4 * pc, 4);
        int op = instruction & 0x7F, a = (instruction >> 7) & 0xFF, k = (instruction >> 15) & 1;
        switch (op) { /* (a jump, a test or a loop: which fields a run reads may differ from run to run) */
        case OP_JMP: case OP_EQ: case OP_LT: case OP_LE: case OP_EQK: case OP_EQI: case OP_LTI: case OP_LEI: case OP_GTI:
        case OP_GEI: case OP_TEST: case OP_TESTSET: case OP_LFALSESKIP: case OP_FORPREP: case OP_FORLOOP:
        case OP_TFORPREP: case OP_TFORCALL: case OP_TFORLOOP:
            *varies = 1;
            break;
        default: break;
        }
        int b = (instruction >> 16) & 0xFF, c = (instruction >> 24) & 0xFF;
        int valueC = !k && c == reg; /* RK(C) names the register */
        int escapes;
        switch (op) {
        case OP_LEN: /* reads the table's length */
            escapes = 0;
            if (b == reg) *varies = 1; /* (not a field: the list of keys does not say it) */
            break;
        case OP_LOADI: case OP_LOADF: case OP_LOADK: case OP_LOADKX: case OP_LOADFALSE: case OP_LFALSESKIP:
        case OP_LOADTRUE: case OP_LOADNIL: case OP_GETUPVAL: case OP_GETTABUP: case OP_NEWTABLE: case OP_CLOSE:
        case OP_JMP: case OP_RETURN0: case OP_VARARG: case OP_VARARGPREP: case OP_EXTRAARG:
        case OP_NOT: case OP_EQK: case OP_EQI: case OP_LTI: case OP_LEI: case OP_GTI: case OP_GEI: case OP_TEST:
            escapes = 0; /* writes a register, or reads the table's length, truth or a constant comparison */
            break;
        case OP_GETI: case OP_GETFIELD: /* reads a field */
            escapes = 0;
            if (b == reg && *named && !note_key(L, keys, function, op, c)) *named = 0;
            break;
        case OP_GETTABLE: /* reads a field whose key is a value (as a key, another table's __index could receive it) */
            escapes = c == reg;
            if (b == reg) *named = 0;
            break;
        case OP_MOVE: case OP_UNM: case OP_BNOT: case OP_TESTSET: escapes = b == reg; break;
        case OP_SETUPVAL: case OP_TBC: case OP_RETURN1: case OP_MMBINI: case OP_MMBINK: escapes = a == reg; break;
        case OP_SETTABUP: escapes = valueC; break;
        case OP_SETTABLE: escapes = a == reg || b == reg || valueC; break;
        case OP_SETI: case OP_SETFIELD: escapes = a == reg || valueC; break;
        case OP_SELF: escapes = b == reg || valueC; break;
        case OP_ADDI: case OP_ADDK: case OP_SUBK: case OP_MULK: case OP_MODK: case OP_POWK: case OP_DIVK: case OP_IDIVK:
        case OP_BANDK: case OP_BORK: case OP_BXORK: case OP_SHRI: case OP_SHLI:
            escapes = b == reg;
            break;
        case OP_ADD: case OP_SUB: case OP_MUL: case OP_MOD: case OP_POW: case OP_DIV: case OP_IDIV: case OP_BAND:
        case OP_BOR: case OP_BXOR: case OP_SHL: case OP_SHR:
            escapes = b == reg || c == reg; /* the other operand's metamethod would receive it */
            break;
        case OP_MMBIN: case OP_EQ: case OP_LT: case OP_LE: escapes = a == reg || b == reg; break;
        case OP_CONCAT: escapes = in_range(reg, a, b); break;
        case OP_CALL: case OP_TAILCALL: escapes = in_range(reg, a, b == 0 ? -1 : b); break;
        case OP_RETURN: escapes = in_range(reg, a, b == 0 ? -1 : b - 1); break;
        case OP_FORLOOP: case OP_FORPREP: escapes = in_range(reg, a, 4); break;
        case OP_TFORPREP: case OP_TFORCALL: case OP_TFORLOOP: escapes = in_range(reg, a, 5); break;
        case OP_SETLIST: escapes = in_range(reg, a, b == 0 ? -1 : b + 1); break;
        case OP_CLOSURE: {
            size_t child = (instruction >> 15) & 0x1FFFF;
            if (child >= function->children) return 0;
            escapes = 0;
            for (size_t i = 0; i < function->childUpvalueCounts[child]; i++) {
                const unsigned char *upvalue = function->childUpvalues[child] + 3 * i;
                if (upvalue[0] && upvalue[1] == reg) escapes = 1; /* captured from this function's stack */
            }
            break;
        }
        default: escapes = 1; /* an instruction this file does not know */
        }
        if (escapes) return 0;
    }
    return 1;
}

/// Reads past a dump's header (ldump.c's `dumpHeader`) and the main function's upvalue count: Lua 5.4's format,
/// with this machine's instruction, integer and float layout (its check values read back as written).
static void read_header(Reader *reader) {
    static const unsigned char signature[] = { 0x1B, 'L', 'u', 'a', 0x54, 0, 0x19, 0x93, '\r', '\n', 0x1A, '\n',
                                               4, sizeof(lua_Integer), sizeof(lua_Number) };
    const unsigned char *header = take(reader, sizeof(signature));
    if (header == NULL || memcmp(header, signature, sizeof(signature)) != 0) { reader->failed = 1; return; }
    const unsigned char *checks = take(reader, sizeof(lua_Integer) + sizeof(lua_Number) + 1);
    if (checks == NULL) return;
    lua_Integer integer;
    lua_Number number;
    memcpy(&integer, checks, sizeof(integer));
    memcpy(&number, checks + sizeof(integer), sizeof(number));
    if (integer != 0x5678 || number != (lua_Number)370.5) reader->failed = 1;
}

typedef struct {
    unsigned char *bytes;
    size_t count, capacity;
} Dump;

static int write_dump(lua_State *L, const void *bytes, size_t count, void *context) {
    (void)L;
    Dump *dump = context;
    if (dump->count + count > dump->capacity) {
        size_t capacity = dump->capacity * 2 + count + 256;
        unsigned char *grown = realloc(dump->bytes, capacity);
        if (grown == NULL) return 1;
        dump->bytes = grown;
        dump->capacity = capacity;
    }
    memcpy(dump->bytes + dump->count, bytes, count);
    dump->count += count;
    return 0;
}

/// What `clua_reads_only_argument` asks of the function dumped (the outermost one; nested ones are read past).
typedef struct {
    int reg, keys, named, varies, answer;
} ReadsOnly;

static void judge(lua_State *L, const Function *function, void *context) {
    ReadsOnly *question = context;
    if (function->depth > 0) return;
    if (function->parameters <= question->reg) question->answer = !function->vararg; /* never named but by `...` */
    else question->answer = reads_only(L, function, question->reg, question->keys, &question->named, &question->varies);
}

/// Reads the dump of the function on the top of the stack (popping it) and hands each function in it to `visit`;
/// 0 when the dump could not be made or read.
static int visit_dump(lua_State *L, int strip, Visit visit, void *context) {
    Dump dump = { NULL, 0, 0 };
    int status = lua_dump(L, write_dump, &dump, strip);
    lua_pop(L, 1);
    Reader reader = { dump.bytes, dump.bytes + dump.count, status != 0 };
    read_header(&reader);
    const unsigned char *upvalues;
    size_t upvalueCount;
    if (!reader.failed) read_function(&reader, L, 0, visit, context, &upvalues, &upvalueCount);
    free(dump.bytes);
    return !reader.failed;
}

/// `clua_reads_only_argument`, and with `fieldsOnly` a list only when every run reads each of those fields and
/// nothing else of it: no length, and no jump, test or loop in the function (a branch may read other fields).
static int reads_only_argument(lua_State *L, int index, int argument, int fieldsOnly) {
    luaL_checkstack(L, 4, "reading a function's bytecode");
    if (argument < 1 || lua_type(L, index) != LUA_TFUNCTION || lua_iscfunction(L, index)) return 0;
    index = lua_absindex(L, index);
    lua_newtable(L); /* the keys read (made first: nothing below raises while buffers are held) */
    ReadsOnly question = { argument - 1 /* the parameters are the first registers */, lua_gettop(L), 1, 0, 0 };
    lua_pushvalue(L, index);
    int answer = visit_dump(L, 1, judge, &question) && question.answer;
    if (answer && question.named && !(fieldsOnly && question.varies)) { /* (no buffer is held now: making the list may raise) */
        lua_newtable(L); /* the set as a list */
        lua_Integer count = 0;
        lua_pushnil(L);
        while (lua_next(L, question.keys) != 0) {
            lua_pop(L, 1);
            lua_pushvalue(L, -1);
            lua_rawseti(L, -3, ++count);
        }
        lua_remove(L, question.keys);
        return 2;
    }
    lua_pop(L, 1);
    return answer;
}

int clua_reads_only_argument(lua_State *L, int index, int argument) {
    return reads_only_argument(L, index, argument, 0);
}

int clua_reads_only_fields(lua_State *L, int index, int argument) {
    return reads_only_argument(L, index, argument, 1) == 2;
}

int clua_reads_only(lua_State *L) {
    int argument = (int)luaL_optinteger(L, 2, 1);
    if (lua_toboolean(L, 3)) {
        if (clua_reads_only_fields(L, 1, argument)) return 1;
        lua_pushboolean(L, 0);
        return 1;
    }
    int answer = clua_reads_only_argument(L, 1, argument);
    if (answer == 2) return 1; /* the list of keys read */
    lua_pushboolean(L, answer);
    return 1;
}

// MARK: Globals a chunk reads and writes (`luastore check`'s listing)

static int is_env(const Function *f, int upvalue) {
    return (size_t)upvalue < f->upvalueNames && f->upvalueNameLength[upvalue] == 4 && memcmp(f->upvalueName[upvalue], "_ENV", 4) == 0;
}

static int constant_string(const Function *f, int index) {
    return (size_t)index < f->constants && f->constantLength[index] != SIZE_MAX;
}

/// Appends `{ name = K[key], line = line, write = write, nested = depth > 0 }` to the list at `out`.
static void emit_access(lua_State *L, int out, const Function *f, int key, int line, int write) {
    lua_createtable(L, 0, 4);
    lua_pushlstring(L, (const char *)f->constantText[key], f->constantLength[key]);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, line);
    lua_setfield(L, -2, "line");
    lua_pushboolean(L, write);
    lua_setfield(L, -2, "write");
    lua_pushboolean(L, f->depth > 0);
    lua_setfield(L, -2, "nested");
    lua_rawseti(L, out, (lua_Integer)lua_rawlen(L, out) + 1);
}

/// Lists the accesses of `f` to its globals by constant names: through its `_ENV` upvalue (`x`, `x = …`,
/// `function x() end`), and through a register holding `_ENV` or just read from the global `_G` (`_G.x`,
/// `_G.x = …`; and the form Lua compiles a global to when the function has more than 256 constants: `_ENV` and
/// the name each in a register). Each with its line.
static void list_accesses(lua_State *L, int out, const Function *f) {
    unsigned char globalsIn[256] = { 0 }; /* the register holds `_ENV` or `_G` */
    int32_t constantIn[256];              /* the index of the string constant the register holds, or -1 */
    memset(constantIn, 0xFF, sizeof(constantIn));
    int line = f->lineDefined;
    size_t absolute = 0;
    for (size_t pc = 0; pc < f->instructions; pc++) {
        if (pc < f->lineInfoCount) {
            if (f->lineInfo[pc] == -0x80) {
                if (absolute < f->absoluteCount) line = (int)f->absoluteLine[absolute++];
            } else {
                line += f->lineInfo[pc];
            }
        }
        uint32_t instruction;
        memcpy(&instruction, f->code + 4 * pc, 4);
        int op = instruction & 0x7F, a = (instruction >> 7) & 0xFF, k = (instruction >> 15) & 1;
        int b = (instruction >> 16) & 0xFF, c = (instruction >> 24) & 0xFF;
        int holdsGlobals = 0, holdsConstant = -1;
        switch (op) {
        case OP_GETTABUP:
            if (is_env(f, b) && constant_string(f, c)) {
                emit_access(L, out, f, c, line, 0);
                holdsGlobals = f->constantLength[c] == 2 && memcmp(f->constantText[c], "_G", 2) == 0;
            }
            break;
        case OP_SETTABUP:
            if (is_env(f, a) && constant_string(f, b)) emit_access(L, out, f, b, line, 1);
            break;
        case OP_GETUPVAL:
            holdsGlobals = is_env(f, b);
            break;
        case OP_LOADK: {
            int index = (int)((instruction >> 15) & 0x1FFFF);
            if (constant_string(f, index)) holdsConstant = index;
            break;
        }
        case OP_GETFIELD:
            if (globalsIn[b] && constant_string(f, c)) emit_access(L, out, f, c, line, 0);
            break;
        case OP_GETTABLE:
            if (globalsIn[b] && constantIn[c] >= 0) emit_access(L, out, f, constantIn[c], line, 0);
            break;
        case OP_SETFIELD:
            if (globalsIn[a] && constant_string(f, b)) emit_access(L, out, f, b, line, 1);
            break;
        case OP_SETTABLE:
            if (globalsIn[a] && constantIn[b] >= 0) emit_access(L, out, f, constantIn[b], line, 1);
            break;
        default: break;
        }
        (void)k;
        switch (op) { /* what the instruction wrote no longer holds what it held */
        case OP_SETTABUP: case OP_SETTABLE: case OP_SETI: case OP_SETFIELD: case OP_SETUPVAL: case OP_SETLIST:
        case OP_MMBIN: case OP_MMBINI: case OP_MMBINK: case OP_CLOSE: case OP_TBC: case OP_JMP: case OP_EQ: case OP_LT:
        case OP_LE: case OP_EQK: case OP_EQI: case OP_LTI: case OP_LEI: case OP_GTI: case OP_GEI: case OP_TEST:
        case OP_RETURN: case OP_RETURN0: case OP_RETURN1: case OP_TFORPREP: case OP_EXTRAARG: case OP_VARARGPREP:
            break;
        case OP_CALL: case OP_TAILCALL: case OP_VARARG: case OP_TFORCALL: case OP_LOADNIL: case OP_FORLOOP:
        case OP_FORPREP: case OP_TFORLOOP: case OP_SELF:
            memset(globalsIn + a, 0, sizeof(globalsIn) - (size_t)a);
            for (int r = a; r < 256; r++) constantIn[r] = -1;
            break;
        default:
            globalsIn[a] = 0;
            constantIn[a] = -1;
        }
        if (holdsGlobals) globalsIn[a] = 1;
        if (holdsConstant >= 0) constantIn[a] = holdsConstant;
    }
}

static void list_into(lua_State *L, const Function *function, void *out) {
    list_accesses(L, *(int *)out, function);
}

int clua_global_accesses(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_settop(L, 1);
    lua_newtable(L); /* the list, 2 */
    int out = 2;
    lua_pushvalue(L, 1);
    if (!visit_dump(L, 0, list_into, &out)) return luaL_error(L, "cannot read the function's bytecode");
    return 1;
}
