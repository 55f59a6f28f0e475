// The VM's allocator: counts every byte against the cap, and serves small blocks from slabs of the VM's own.
//
// Most of what Lua allocates is small and short-lived — a table and its slots for every action, a proxy, a
// props table — and freed in bursts by the collector. Handed to glibc, those bursts cost twice: its per-thread
// cache holds only a few blocks per size, so allocating and freeing the two blocks of a one-field table went to
// its arenas; and what it cannot cache it sorts later, lazily — after a large state's `init` or a full
// collection freed a million blocks, each of the next few hundred small `malloc`s sorted ten thousand of them
// (0.4–1.2 ms, inside a dispatch). So blocks of up to `SMALL_LIMIT` bytes, in classes of `SMALL_STEP`, never
// reach glibc: they are cut from `SLAB_BYTES` slabs (no header per block), and a freed one goes onto its class's
// free list, to be handed out again. A VM is used from one thread at a time, so the lists need no locks. Freed
// blocks are not live Lua memory: they do not count against the cap (there are never more of a class than the
// VM once held live at a time); the slabs go back to the system with the VM.
#include "clua_guard.h"

#define SMALL_STEP 16
#define SMALL_LIMIT (CLUA_SMALL_CLASSES * SMALL_STEP)
#define SLAB_BYTES (64 << 10)
/// A slab's first 16 bytes link the VM's slabs (blocks start 16-byte aligned, as malloc's do).
#define SLAB_HEADER 16

/// The class of a block of `size` bytes, or -1 when it is not small.
static inline int small_class(size_t size) {
    return size > 0 && size <= SMALL_LIMIT ? (int)((size - 1) / SMALL_STEP) : -1;
}

/// Cuts a block of `bytes` from the newest slab, starting a new slab when it has too little left (the few bytes
/// left over, under 128 of 64 KiB, stay unused).
static void *cut(CLuaSmallBlocks *blocks, size_t bytes) {
    if ((size_t)(blocks->uncutEnd - blocks->uncut) < bytes) {
        char *slab = malloc(SLAB_BYTES);
        if (slab == NULL) return NULL;
        *(void **)slab = blocks->slabs;
        blocks->slabs = slab;
        blocks->uncut = slab + SLAB_HEADER;
        blocks->uncutEnd = slab + SLAB_BYTES;
    }
    void *block = blocks->uncut;
    blocks->uncut += bytes;
    return block;
}

static inline void *take_small(CLuaGuard *g, int class) {
    CLuaSmallBlocks *blocks = &g->smallBlocks;
    void *block = blocks->free[class];
    if (block == NULL) return cut(blocks, (size_t)(class + 1) * SMALL_STEP);
    void *next = *(void **)block;
    blocks->free[class] = next;
    // Freed blocks are often cold (the collector frees thousands at once); reading the next one's link when it
    // is taken would stall on the miss, so it is fetched now.
    if (next != NULL) __builtin_prefetch(next, 1);
    return block;
}

/// Frees a block of `size` bytes: a small one (always cut from a slab) onto its class's list, others to glibc.
static inline void release(CLuaGuard *g, void *block, size_t size) {
    int class = small_class(size);
    if (class < 0) {
        free(block);
        return;
    }
    *(void **)block = g->smallBlocks.free[class];
    g->smallBlocks.free[class] = block;
}

void *clua_allocate(void *ud, void *ptr, size_t osize, size_t nsize) {
    CLuaGuard *g = (CLuaGuard *)ud;
    size_t old = ptr != NULL ? osize : 0;
    if (nsize == 0) {
        if (ptr != NULL) release(g, ptr, old);
        g->bytesInUse -= old;
        return NULL;
    }
    if (nsize > old && g->hostAllocations == 0 && g->bytesInUse - old + nsize > g->bytesLimit) {
        if (!g->memoryRefused && g->state != NULL && g->failureLine == 0) clua_note_location(g->state, g, 0);
        g->memoryRefused = 1;
        return NULL;
    }
    int oldClass = ptr != NULL ? small_class(old) : -1;
    int newClass = small_class(nsize);
    void *block;
    if (ptr != NULL && oldClass >= 0 && oldClass == newClass) {
        block = ptr; /* the block is large enough already */
    } else if (newClass < 0 && (ptr == NULL || oldClass < 0)) {
        block = realloc(ptr, nsize);
    } else {
        block = newClass >= 0 ? take_small(g, newClass) : malloc(nsize);
        if (block != NULL && ptr != NULL) {
            memcpy(block, ptr, old < nsize ? old : nsize);
            release(g, ptr, old);
        }
    }
    if (block == NULL) {
        if (g->hostAllocations > 0) abort(); /* the host process itself is out of memory */
        g->memoryRefused = 1;
        return NULL;
    }
    g->bytesInUse = g->bytesInUse - old + nsize;
    if (g->bytesInUse > g->bytesPeak) g->bytesPeak = g->bytesInUse;
    g->allocationCount += 1;
    return block;
}

void clua_free_slabs(CLuaGuard *g) {
    for (void *slab = g->smallBlocks.slabs; slab != NULL;) {
        void *next = *(void **)slab;
        free(slab);
        slab = next;
    }
    g->smallBlocks = (CLuaSmallBlocks){ 0 };
}
