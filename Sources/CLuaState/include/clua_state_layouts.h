// Where the state runtime's calls put their results, declared once: the barrier's C lays them out
// (`runs.c`), Swift reads them (`StateRuntime.swift` names these constants), and the Lua half passes them on
// untouched — no language writes a position of its own. "A run returns one more thing" is one line here, the
// C that writes it and the Swift that reads it.
#ifndef CLUA_STATE_LAYOUTS_H
#define CLUA_STATE_LAYOUTS_H

/// What a flush gives (`flush`; within a run's results from `FLUSHED` on, within `runPosition`'s from its
/// `FLUSHED`): how many readers ran, their ids, their values (or error messages), and which of them failed (lists
/// of that length). Offsets from where the layout starts.
#define CLUA_FLUSH_RESULTS(X) \
    X(COUNT, 0)   \
    X(READERS, 1) \
    X(VALUES, 2)  \
    X(FAILED, 3)

/// What `reduceRun` and `reduce` give: the position of the action the run stopped after, its commands (or nil),
/// whether `subscriptions` must run again, whether the action was refused (no string `type`); while journaling,
/// the run's journal records (`changes_record`) and their length; when the readers ran within the run, whether
/// nothing is left for a flush, what they gave (a flush's layout, 4 slots), the message of a flush that failed,
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
    X(FLUSH_FAILURE, 12)     \
    X(FLUSH_TIMED_OUT, 13)

/// What `runPosition` gives (a run that raised): the action being reduced, and what the readers gave before it (a
/// flush's layout).
#define CLUA_RUN_POSITION_RESULTS(X) \
    X(POSITION, 1)                   \
    X(FLUSHED, 2)

#define CLUA_FLUSH_RESULT_ENUM(name, position) CLUA_FLUSH_##name = position,
#define CLUA_RUN_RESULT_ENUM(name, position) CLUA_RUN_##name = position,
#define CLUA_RUN_POSITION_RESULT_ENUM(name, position) CLUA_RUN_POSITION_##name = position,
enum { CLUA_FLUSH_RESULTS(CLUA_FLUSH_RESULT_ENUM) CLUA_FLUSH_RESULT_COUNT = 4 };
enum { CLUA_RUN_RESULTS(CLUA_RUN_RESULT_ENUM) CLUA_RUN_RESULT_COUNT = 13 };
/// A run without readers within it ends its results at the records.
enum { CLUA_RUN_RESULT_COUNT_WITHOUT_FLUSH = 6 };
enum { CLUA_RUN_POSITION_RESULTS(CLUA_RUN_POSITION_RESULT_ENUM) CLUA_RUN_POSITION_RESULT_COUNT = 5 };
#undef CLUA_FLUSH_RESULT_ENUM
#undef CLUA_RUN_RESULT_ENUM
#undef CLUA_RUN_POSITION_RESULT_ENUM

#endif
