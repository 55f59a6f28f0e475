// Where the state runtime's calls put their results, declared once: the barrier's C lays them out
// (`runs.c`), Swift reads them (`StateRuntime.swift` names these constants), and the Lua half passes them on
// untouched — no language writes a position of its own. "A run returns one more thing" is one line here, the
// C that writes it and the Swift that reads it.
#ifndef CLUA_STATE_LAYOUTS_H
#define CLUA_STATE_LAYOUTS_H

/// What a flush gives (`flush`; within a run's results from `FLUSHED` on, within `runPosition`'s from its
/// `FLUSHED`): how many readers ran, their ids, their values (or error messages), and which of them failed (lists
/// of that length); and, when every value is from one reader and none failed, that reader's id (the host then
/// reads the values alone, not the ids and the failures; nil otherwise). Offsets from where the layout starts.
#define CLUA_FLUSH_RESULTS(X) \
    X(COUNT, 0)   \
    X(READERS, 1) \
    X(VALUES, 2)  \
    X(FAILED, 3)  \
    X(UNIFORM, 4)

/// What `reduceRun` and `reduce` give: the position of the action the run stopped after, its commands (or nil),
/// whether `subscriptions` must run again, whether the action was refused (no string `type`); while journaling,
/// the run's journal records (`changes_record`) and their length; when the readers ran within the run, whether
/// nothing is left for a flush, what they gave (a flush's layout, 5 slots), the message of a flush that failed,
/// and whether it ran out of time.
#define CLUA_RUN_RESULTS(X)  \
    X(POSITION, 1)           \
    X(COMMANDS, 2)           \
    X(DIRTY, 3)              \
    X(REFUSED, 4)            \
    X(RECORDS, 5)            \
    X(RECORDS_LENGTH, 6)     \
    X(SETTLED, 7)            \
    X(FLUSHED, 8)            \
    X(FLUSH_FAILURE, 13)     \
    X(FLUSH_TIMED_OUT, 14)

/// What `runPosition` gives (a run that raised): the action being reduced, and what the readers gave before it (a
/// flush's layout).
#define CLUA_RUN_POSITION_RESULTS(X) \
    X(POSITION, 1)                   \
    X(FLUSHED, 2)

/// A reader's record (`readers[id]`: `state_readers.lua` makes it, `reads.c` reads it): its function, the child
/// store it belongs to (nil for the app's own), its last record of reads (real table -> set of keys), how many
/// reads that holds, what its function's bytecode says it reads of the state (`true` until looked at: `false`, or
/// the list of keys of the state's root it can read, `clua_reads_only_fields`), and the root whose every such key
/// its record holds (`false` for none: see `run_by_keys`, reads.c). The barrier gives them to the Lua side
/// (`barrierlayouts()`).
#define CLUA_READER_SLOTS(X) \
    X(FN, 1)                 \
    X(CHILD, 2)              \
    X(READS, 3)              \
    X(COUNT, 4)              \
    X(KEYS, 5)               \
    X(KEYS_ROOT, 6)

/// The changes a run collects (`collected`: `state_journal.lua` writes them, `changes.c` and `json.c` write them
/// out as a recording's JSON, `StateRuntime.changes(fromCollected:)` reads them): for each action that changed
/// something an entry — its position and how many changes, at these offsets from the slot before it — then each
/// change in turn: its depth (negative for a removal), that many keys of its path, and its new value (none for a
/// removal). The barrier gives them to the Lua side (`barrierlayouts()`).
#define CLUA_COLLECTED_ENTRY(X) \
    X(POSITION, 1)              \
    X(COUNT, 2)

/// A transaction's journal (`journal`: `journal.c` writes it and rolls it back, `changes.c` and
/// `state_journal.lua` read it back): each write an entry of these slots, at these offsets from the slot before it —
/// the table written, the key, and the value the key held. The barrier gives them to the Lua side
/// (`barrierlayouts()`).
#define CLUA_JOURNAL_ENTRY(X) \
    X(TABLE, 1)               \
    X(KEY, 2)                 \
    X(OLD, 3)

/// A table the open transaction moved, as the barrier keeps it (`moved`, moves.c): the table, and the place it was
/// in before its first move (its parent and key). And a place a moved table left (`left`): the parent and the key.
/// The barrier gives them to the Lua side (`barrierlayouts()`), whose `settleMoves` checks them.
#define CLUA_MOVED_ENTRY(X) \
    X(TABLE, 1)             \
    X(PARENT, 2)            \
    X(KEY, 3)
#define CLUA_LEFT_ENTRY(X) \
    X(PARENT, 1)           \
    X(KEY, 2)

/// What a run is told to do beside reducing (`run`'s fifth argument, these bits or'd): stop after an action that
/// made the subscriptions stale, and say whether they are stale at every end (a run of one, `reduce`). The
/// host passes them (`StateRuntime.RunFlags`), through the runtime's `reduce` and `reduceRun`.
#define CLUA_RUN_FLAGS(X) \
    X(STOP_WHEN_DIRTY, 1) \
    X(ALWAYS_DIRTY, 2)

#define CLUA_FLUSH_RESULT_ENUM(name, position) CLUA_FLUSH_##name = position,
#define CLUA_RUN_RESULT_ENUM(name, position) CLUA_RUN_##name = position,
#define CLUA_RUN_POSITION_RESULT_ENUM(name, position) CLUA_RUN_POSITION_##name = position,
enum { CLUA_FLUSH_RESULTS(CLUA_FLUSH_RESULT_ENUM) CLUA_FLUSH_RESULT_COUNT = 5 };
enum { CLUA_RUN_RESULTS(CLUA_RUN_RESULT_ENUM) CLUA_RUN_RESULT_COUNT = 14 };
/// A run without readers within it ends its results at the records.
enum { CLUA_RUN_RESULT_COUNT_WITHOUT_FLUSH = 6 };
enum { CLUA_RUN_POSITION_RESULTS(CLUA_RUN_POSITION_RESULT_ENUM) CLUA_RUN_POSITION_RESULT_COUNT = 6 };
#define CLUA_READER_SLOT_ENUM(name, position) CLUA_READER_##name = position,
#define CLUA_COLLECTED_ENUM(name, position) CLUA_COLLECTED_##name = position,
enum { CLUA_READER_SLOTS(CLUA_READER_SLOT_ENUM) CLUA_READER_SLOT_COUNT = 6 };
enum { CLUA_COLLECTED_ENTRY(CLUA_COLLECTED_ENUM) CLUA_COLLECTED_ENTRY_LENGTH = 2 };
#define CLUA_JOURNAL_ENUM(name, offset) CLUA_JOURNAL_##name = offset,
enum { CLUA_JOURNAL_ENTRY(CLUA_JOURNAL_ENUM) CLUA_JOURNAL_ENTRY_LENGTH = 3 };
#undef CLUA_JOURNAL_ENUM
#define CLUA_MOVED_ENUM(name, offset) CLUA_MOVED_##name = offset,
#define CLUA_LEFT_ENUM(name, offset) CLUA_LEFT_##name = offset,
enum { CLUA_MOVED_ENTRY(CLUA_MOVED_ENUM) CLUA_MOVED_ENTRY_LENGTH = 3 };
enum { CLUA_LEFT_ENTRY(CLUA_LEFT_ENUM) CLUA_LEFT_ENTRY_LENGTH = 2 };
#undef CLUA_MOVED_ENUM
#undef CLUA_LEFT_ENUM
#define CLUA_RUN_FLAG_ENUM(name, bit) CLUA_RUN_##name = bit,
enum { CLUA_RUN_FLAGS(CLUA_RUN_FLAG_ENUM) };
#undef CLUA_RUN_FLAG_ENUM
#undef CLUA_READER_SLOT_ENUM
#undef CLUA_COLLECTED_ENUM
#undef CLUA_FLUSH_RESULT_ENUM
#undef CLUA_RUN_RESULT_ENUM
#undef CLUA_RUN_POSITION_RESULT_ENUM

#endif
