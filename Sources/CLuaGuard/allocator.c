// The VM's allocator: counts every byte against the cap, and keeps freed small blocks for reuse.
//
// Most of what Lua allocates is small and short-lived — a table and its slots for every action, a proxy, a
// props table — and freed in bursts by the collector. glibc's per-thread cache holds only a few blocks per
// size, so those bursts went to its arenas: allocating and freeing the two blocks of a one-field table cost
// more than building it. A VM is used from one thread at a time, so its own free lists need no locks:
// blocks of up to `SMALL_LIMIT` bytes, in classes of `SMALL_STEP`, are kept (up to `SMALL_KEEP` per class)
// and handed out again. Kept blocks are not live Lua memory: they do not count against the cap.
#include "clua_guard.h"

#define SMALL_STEP 16
#define SMALL_LIMIT 128
#define SMALL_CLASSES (SMALL_LIMIT / SMALL_STEP)
#define SMALL_KEEP 4096

typedef struct SmallBlocks {
    void *free[SMALL_CLASSES]; /* each free block's first word links to the next */
    int count[SMALL_CLASSES];
} SmallBlocks;

/// The class of a block of `size` bytes, or -1 when it is not small.
static inline int small_class(size_t size) {
    return size > 0 && size <= SMALL_LIMIT ? (int)((size - 1) / SMALL_STEP) : -1;
}

static void *take_small(CLuaGuard *g, int class) {
    SmallBlocks *blocks = g->smallBlocks;
    if (blocks != NULL && blocks->free[class] != NULL) {
        void *block = blocks->free[class];
        void *next = *(void **)block;
        blocks->free[class] = next;
        blocks->count[class]--;
        // Freed blocks are often cold (the collector frees thousands at once); reading the next one's link
        // when it is taken would stall on the miss, so it is fetched now.
        if (next != NULL) __builtin_prefetch(next, 1);
        return block;
    }
    return malloc((size_t)(class + 1) * SMALL_STEP);
}

static void release(CLuaGuard *g, void *block, size_t size) {
    int class = small_class(size);
    if (class >= 0) {
        if (g->smallBlocks == NULL) g->smallBlocks = calloc(1, sizeof(SmallBlocks));
        SmallBlocks *blocks = g->smallBlocks;
        if (blocks != NULL && blocks->count[class] < SMALL_KEEP) {
            *(void **)block = blocks->free[class];
            blocks->free[class] = block;
            blocks->count[class]++;
            return;
        }
    }
    free(block);
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

void clua_free_kept_blocks(CLuaGuard *g) {
    SmallBlocks *blocks = g->smallBlocks;
    if (blocks == NULL) return;
    for (int class = 0; class < SMALL_CLASSES; class++) {
        void *block = blocks->free[class];
        while (block != NULL) {
            void *next = *(void **)block;
            free(block);
            block = next;
        }
    }
    free(blocks);
    g->smallBlocks = NULL;
}
