import CLuaState
import LuaKit
import LuaStoreTestSupport
import Testing

/// `makebarrier` (CLuaState/barrier.c) driven directly from trusted Lua, with fallbacks that only count what
/// they were handed: what the C paths do themselves and what they hand over.
@Suite struct BarrierTests {
    static let thread = LuaThread(name: "BarrierTests")

    /// A fresh VM whose trusted code has the state engine's C (`makebarrier`), on the suite's thread.
    func withVM<T>(_ body: (LuaVM) throws -> T) async throws -> T {
        try await withTaskExecutorPreference(Self.thread) { () throws -> T in
            let vm = try LuaVM(limits: .unhurried)
            try vm.defineTrusted(library: clua_state_library())
            let result = try body(vm)
            #expect(vm.stackDepth == 0, "the stack is empty after every call")
            return result
        }
    }

    /// `makebarrier` is for trusted code only (and only where a layer defined it), and says what it is missing.
    @Test func barriersAreForTrustedCodeOnly() async throws {
        try await withVM { vm throws in
            #expect(try vm.run("return (function() return makebarrier end)()", chunkName: "script.lua") == [.nil], "hidden from scripts")
            let incomplete = try vm.loadTrusted("return makebarrier { targets = {} }", chunkName: "probe")
            let error = luaError { _ = try vm.call(incomplete) }
            #expect(error?.message.contains("makebarrier: proxies is missing") == true, "\(error.map(String.init(describing:)) ?? "")")
        }
        let plain = try await withTaskExecutorPreference(Self.thread) { () throws -> [LuaValue] in
            let vm = try LuaVM(limits: .unhurried)
            return try vm.call(try vm.loadTrusted("return type(makebarrier)", chunkName: "probe"))
        }
        #expect(plain == ["nil"], "a VM no layer gave the engine's C has no barrier")
    }

    /// A barrier over fresh caches, with counting fallbacks, as the chunk's local `B`; `body` runs after it.
    /// The chunk returns whatever `body` returns.
    func run(_ body: String) async throws -> [LuaValue] {
        try await withVM { vm in
            let chunk = try vm.loadTrusted("""
                local handed = { index = 0, newindex = 0, adopt = 0, runreader = 0, finishread = 0, indexreads = 0, failedread = 0 }
                local targets, proxies, journal, dependents, readers, due, isDue = {}, {}, {}, {}, {}, {}, {}
                local parents, parentKeys, moved, shared = {}, {}, {}, {}
                local ALL = {}
                local flushed = { ids = {}, values = {}, failed = {} }
                local holder = { state = { count = 1, items = { { done = false } } } }
                local meta = { __metatable = "test state" }
                local B
                B = makebarrier {
                  targets = targets, proxies = proxies, meta = meta, weakkeys = { __mode = "k" },
                  weakall = { __mode = "kv" }, parents = parents, parentkeys = parentKeys, journal = journal, dependents = dependents, due = due, isdue = isDue,
                  moved = moved, movedindex = {}, left = {}, leftseen = {}, shared = shared, holder = holder, statedepth = 3,
                  index = function(p, k) handed.index = handed.index + 1; return targets[p][k] end,
                  newindex = function(p, k, v)
                    handed.newindex = handed.newindex + 1
                    B.record(targets[p], k, targets[p][k])
                    rawset(targets[p], k, v)
                  end,
                  all = ALL, structure = {},
                  adopt = function(result) handed.adopt = handed.adopt + 1; holder.state = targets[result] or result end,
                  settle = function() end, collect = function() end, collected = {}, children = {}, encoded = {}, holderstate = {},
                  unwrap = function(value) return value end, flushed = flushed, flushedids = flushed.ids,
                  flushedvalues = flushed.values, flushedfailed = flushed.failed,
                  settled = function() return true end, readers = readers,
                  runreader = function(id)
                    handed.runreader = handed.runreader + 1
                    local count = B.flushedcount() + 1
                    B.flushedcount(count)
                    flushed.ids[count], flushed.values[count], flushed.failed[count] = id, "ran in Lua", false
                    return false
                  end,
                  finishread = function(id, value)
                    handed.finishread = handed.finishread + 1
                    B.endread()
                    return targets[value] or value, true
                  end,
                  indexreads = function(id, record, count)
                    handed.indexreads = handed.indexreads + 1
                    readers[id][\(CLUA_READER_READS)], readers[id][\(CLUA_READER_COUNT)] = record, count
                  end,
                  failedread = function(id)
                    handed.failedread = handed.failedread + 1
                    B.setmode(B.CLOSED)
                  end,
                }
                meta.__index, meta.__newindex = B.index, B.newindex
                local real = holder.state
                local state = B.proxy(real) -- (good until the first call: each test takes it again after `begin`, `setmode(READ)`)
                \(body)
                """, chunkName: "barrier_test.lua")
            return try vm.call(chunk)
        }
    }

    @Test func theModesAreExportedOnceAndOthersRefused() async throws {
        let results = try await run("""
            local ok, message = pcall(B.setmode, 7)
            return B.CLOSED, B.WRITE, B.READ, B.mode(), ok, message
            """)
        #expect(results[0] == 0 && results[1] == 1 && results[2] == 2)
        #expect(results[3] == 0) // a new barrier is closed
        #expect(results[4] == false)
        #expect(results[5].string?.contains("not a mode of the barrier") == true)
    }

    /// The layouts the three languages share are declared once (clua_state_layouts.h): the barrier gives the Lua
    /// side the very positions Swift reads from the header, and they stand as written here — a golden list, so
    /// that moving a slot is a change of the contract made on purpose, in one place, with this list.
    @Test func theLayoutsAreDeclaredOnceAndGivenToLua() async throws {
        let givenToLua = try await run("""
            return barrierlayouts()
            """)
        // (In the order the header declares them, which `state_runtime.lua` takes them in.)
        let swiftReads = [CLUA_READER_FN, CLUA_READER_CHILD, CLUA_READER_READS, CLUA_READER_COUNT, CLUA_READER_KEYS,
                          CLUA_READER_KEYS_ROOT,
                          CLUA_COLLECTED_POSITION, CLUA_COLLECTED_COUNT, CLUA_COLLECTED_ENTRY_LENGTH,
                          CLUA_JOURNAL_TABLE, CLUA_JOURNAL_KEY, CLUA_JOURNAL_OLD, CLUA_JOURNAL_ENTRY_LENGTH,
                          CLUA_MOVED_TABLE, CLUA_MOVED_PARENT, CLUA_MOVED_KEY, CLUA_MOVED_ENTRY_LENGTH,
                          CLUA_LEFT_PARENT, CLUA_LEFT_KEY, CLUA_LEFT_ENTRY_LENGTH]
        #expect(givenToLua == swiftReads.map { LuaValue.integer(Int64($0)) })
        let layouts: [String: Int] = [
            "READER_FN": Int(CLUA_READER_FN), "READER_CHILD": Int(CLUA_READER_CHILD), "READER_READS": Int(CLUA_READER_READS),
            "READER_COUNT": Int(CLUA_READER_COUNT), "READER_KEYS": Int(CLUA_READER_KEYS),
            "READER_KEYS_ROOT": Int(CLUA_READER_KEYS_ROOT), "READER_SLOT_COUNT": Int(CLUA_READER_SLOT_COUNT),
            "COLLECTED_POSITION": Int(CLUA_COLLECTED_POSITION), "COLLECTED_COUNT": Int(CLUA_COLLECTED_COUNT),
            "COLLECTED_ENTRY_LENGTH": Int(CLUA_COLLECTED_ENTRY_LENGTH),
            "RUN_POSITION": Int(CLUA_RUN_POSITION), "RUN_COMMANDS": Int(CLUA_RUN_COMMANDS), "RUN_DIRTY": Int(CLUA_RUN_DIRTY),
            "RUN_REFUSED": Int(CLUA_RUN_REFUSED), "RUN_RECORDS": Int(CLUA_RUN_RECORDS),
            "RUN_RECORDS_LENGTH": Int(CLUA_RUN_RECORDS_LENGTH), "RUN_SETTLED": Int(CLUA_RUN_SETTLED),
            "RUN_FLUSHED": Int(CLUA_RUN_FLUSHED), "RUN_FLUSH_FAILURE": Int(CLUA_RUN_FLUSH_FAILURE),
            "RUN_FLUSH_TIMED_OUT": Int(CLUA_RUN_FLUSH_TIMED_OUT), "RUN_RESULT_COUNT": Int(CLUA_RUN_RESULT_COUNT),
            "FLUSH_COUNT": Int(CLUA_FLUSH_COUNT), "FLUSH_READERS": Int(CLUA_FLUSH_READERS), "FLUSH_VALUES": Int(CLUA_FLUSH_VALUES),
            "FLUSH_FAILED": Int(CLUA_FLUSH_FAILED), "FLUSH_UNIFORM": Int(CLUA_FLUSH_UNIFORM),
            "RUN_POSITION_POSITION": Int(CLUA_RUN_POSITION_POSITION),
            "RUN_POSITION_FLUSHED": Int(CLUA_RUN_POSITION_FLUSHED),
            "RUN_STOP_WHEN_DIRTY": Int(CLUA_RUN_STOP_WHEN_DIRTY), "RUN_ALWAYS_DIRTY": Int(CLUA_RUN_ALWAYS_DIRTY),
            "JOURNAL_TABLE": Int(CLUA_JOURNAL_TABLE), "JOURNAL_KEY": Int(CLUA_JOURNAL_KEY), "JOURNAL_OLD": Int(CLUA_JOURNAL_OLD),
            "JOURNAL_ENTRY_LENGTH": Int(CLUA_JOURNAL_ENTRY_LENGTH),
            "MOVED_TABLE": Int(CLUA_MOVED_TABLE), "MOVED_PARENT": Int(CLUA_MOVED_PARENT), "MOVED_KEY": Int(CLUA_MOVED_KEY),
            "MOVED_ENTRY_LENGTH": Int(CLUA_MOVED_ENTRY_LENGTH), "LEFT_PARENT": Int(CLUA_LEFT_PARENT),
            "LEFT_KEY": Int(CLUA_LEFT_KEY), "LEFT_ENTRY_LENGTH": Int(CLUA_LEFT_ENTRY_LENGTH),
        ]
        #expect(layouts == [
            "READER_FN": 1, "READER_CHILD": 2, "READER_READS": 3, "READER_COUNT": 4, "READER_KEYS": 5, "READER_KEYS_ROOT": 6,
            "READER_SLOT_COUNT": 6,
            "COLLECTED_POSITION": 1, "COLLECTED_COUNT": 2, "COLLECTED_ENTRY_LENGTH": 2,
            "RUN_POSITION": 1, "RUN_COMMANDS": 2, "RUN_DIRTY": 3, "RUN_REFUSED": 4, "RUN_RECORDS": 5, "RUN_RECORDS_LENGTH": 6,
            "RUN_SETTLED": 7, "RUN_FLUSHED": 8, "RUN_FLUSH_FAILURE": 13, "RUN_FLUSH_TIMED_OUT": 14, "RUN_RESULT_COUNT": 14,
            "FLUSH_COUNT": 0, "FLUSH_READERS": 1, "FLUSH_VALUES": 2, "FLUSH_FAILED": 3, "FLUSH_UNIFORM": 4,
            "RUN_POSITION_POSITION": 1, "RUN_POSITION_FLUSHED": 2, "RUN_STOP_WHEN_DIRTY": 1, "RUN_ALWAYS_DIRTY": 2,
            "JOURNAL_TABLE": 1, "JOURNAL_KEY": 2, "JOURNAL_OLD": 3, "JOURNAL_ENTRY_LENGTH": 3,
            "MOVED_TABLE": 1, "MOVED_PARENT": 2, "MOVED_KEY": 3, "MOVED_ENTRY_LENGTH": 3,
            "LEFT_PARENT": 1, "LEFT_KEY": 2, "LEFT_ENTRY_LENGTH": 2,
        ])
    }

    @Test func aWriteToAKeyThatStaysIsJournaledInCAndRolledBack() async throws {
        let results = try await run("""
            B.begin()
            state = B.proxy(real) -- (a proxy is good in the call it was handed out in)
            state.count = 5
            local written, slots = real.count, B.journalview() -- (the table holds the journal once asked for it)
            local t, k, old = journal[\(CLUA_JOURNAL_TABLE)], journal[\(CLUA_JOURNAL_KEY)], journal[\(CLUA_JOURNAL_OLD)]
            B.rollback()
            return written, slots, t == real, k, old, real.count, B.mode() == B.CLOSED, handed.newindex, #journal
            """)
        // 5 written, one entry (table, key, old value, where `CLUA_JOURNAL_ENTRY` puts them, copied into the journal's
        // table by `journalview`), undone to 1, the Lua fallback never called, and the journal's table emptied by the
        // rollback.
        #expect(results == [5, .integer(Int64(CLUA_JOURNAL_ENTRY_LENGTH)), true, "count", 1, 1, true, 0, 0])
    }

    /// The journal keeps what it holds alive: a value overwritten in a transaction, which nothing else refers to,
    /// survives full collections until a rollback puts it back — on the journal's thread and, past its first
    /// slots, in its table — and so do the values of the last transaction once it committed, for `rollback(true)`.
    @Test func theJournalKeepsWhatItHoldsThroughCollections() async throws {
        let results = try await run("""
            real.items = {}
            for i = 1, 1500 do real.items[i] = string.rep("item ", 3) .. i end
            real.count = string.rep("n", 40)
            B.begin()
            local items = B.proxy(real).items
            for i = 1, 1500 do items[i] = "x" end -- (1,500 entries: more than the journal's thread keeps)
            B.proxy(real).count = "replaced"
            collectgarbage("collect"); collectgarbage("collect")
            local slots = B.count()
            B.rollback()
            local restored = real.count == string.rep("n", 40)
            for i = 1, 1500 do restored = restored and real.items[i] == string.rep("item ", 3) .. i end
            B.begin()
            B.proxy(real).count = string.rep("m", 40)
            B.commit()
            collectgarbage("collect")
            B.rollback(true)
            return slots, restored, real.count == string.rep("n", 40), #journal
            """)
        #expect(results == [.integer(Int64(CLUA_JOURNAL_ENTRY_LENGTH) * 1501), true, true, 0])
    }

    /// A key that appears or goes away, and a table the call made, all new data, stored (its tables become the
    /// call's proxies, their places recorded, in one pass) are written in C: journaled, and undone by a rollback.
    /// What is not data (a key that is not, a table with a metatable), or nests past the state's depth, goes to
    /// the fallback, which names it; so does a table holding a proxy (a table of the state moved into it).
    @Test func newKeysAndNewTablesAreWrittenInCAndTheRestGoesToTheFallback() async throws {
        let results = try await run("""
            B.begin()
            state = B.proxy(real) -- (a proxy is good in the call it was handed out in)
            state.fresh = true                        -- a key that appears
            local inner = { deep = 1 }
            local box = { boxed = inner, list = { 1, 2, 3 } }
            state.count = box                         -- a new table, over a number
            inner.deep = 2                            -- written through the proxy it became
            state.gone = nil                          -- nothing there: nothing changes
            state.items = nil                         -- a key that goes away (a table leaves)
            local inC = handed.newindex
            local claimed = targets[box] == real.count and targets[inner] == real.count.boxed
            local recorded = parents[real.count] == real and parentKeys[real.count] == "count"
              and parents[real.count.boxed] == real.count and parentKeys[real.count.boxed] == "boxed"
            local written = real.fresh == true and real.count.boxed.deep == 2 and #real.count.list == 3
              and real.items == nil and shared.tablesLeft == true
            state[1 / 0] = 1                          -- not data
            state.odd = setmetatable({}, {})          -- not data
            state.nested = { { { { 1 } } } }          -- past the state's depth (3 levels)
            state.moved = { box }                     -- a table of the state, moved into a new one
            local handedOver = handed.newindex - inC
            B.rollback()
            return inC, claimed, recorded, written, handedOver, real.fresh == nil, real.count, #real.items
            """)
        #expect(results == [0, true, true, true, 4, true, 1, 1])
    }

    /// A move — a proxy of a table of the state, handed out in this call, stored under a key its new parent
    /// holds (what `table.remove`, `table.sort` and swaps do to a list of tables) — is made in C: journaled, noted
    /// once per table with the place it was in before its first move and once per place left, its records pointed
    /// at the new place, the Lua side told a table was replaced; a rollback restores the values, and `clearmoves`
    /// forgets the moves. A move to a new key goes to the fallback.
    @Test func movesAreMadeInCAndNotedOnce() async throws {
        let results = try await run("""
            real.items = { { id = 1 }, { id = 2 }, { id = 3 } }
            local items = real.items
            local one, two, three = items[1], items[2], items[3]
            for i, item in ipairs(items) do parents[item], parentKeys[item] = items, i end
            B.begin()
            local list = B.proxy(items)
            local a, b, c = list[1], list[2], list[3]
            list[1] = b; list[2] = c; list[3] = a                 -- (three moves; each table moved once)
            list[1] = list[3]                                     -- (one moved again: counted once, its place too)
            local afterMoves = handed.newindex
            local movedCount, leftCount = B.movecounts()
            local firstMoved, firstFrom, firstKey = moved[1], moved[2], moved[3]
            local recorded = parents[one] == items and parentKeys[one] == 1
            list[4] = list[2]                                     -- (a new key: the fallback's)
            local afterNewKey = handed.newindex
            B.rollback()
            local restored = items[1] == one and items[2] == two and items[3] == three and items[4] == nil
            B.clearmoves()
            local clearedMoved, clearedLeft = B.movecounts()
            return afterMoves, movedCount, leftCount, firstMoved == two, firstFrom == items, firstKey, recorded,
              shared.tablesLeft, afterNewKey, restored, clearedMoved, clearedLeft, next(moved) == nil
            """)
        #expect(results == [0, 3, 3, true, true, 2, true, true, 1, true, 0, 0, true])
    }

    /// Reads while writing and while a reader runs are done in C (one proxy per table); a read while closed goes
    /// to the fallback.
    @Test func readsGiveOneProxyPerTableAndOtherwiseFallBack() async throws {
        let results = try await run("""
            B.begin()
            state = B.proxy(real)
            local items1, items2 = state.items, state.items
            local count = state.count
            local inC = handed.index
            B.setmode(B.READ)
            state = B.proxy(real)
            local readItems = state.items
            B.endread()
            local whileReading = handed.index
            local _ = state.count
            return rawequal(items1, items2), targets[items1] == real.items, count, inC, whileReading,
              rawequal(readItems, items1), handed.index, getmetatable(items1)
            """)
        #expect(results == [true, true, 1, 0, 0, true, 1, "test state"])
    }

    /// A reader's reads are noted against what it read last time: reading just that again gives no new record
    /// (nothing is allocated, the index of readers stands); reading less, or something else, gives one.
    @Test func aReaderThatReadsWhatItReadLastTimeKeepsItsRecord() async throws {
        let results = try await run("""
            local function read(last, count, body)
              B.setmode(B.READ, last)
              state = B.proxy(real)
              body()
              return B.endread(count)
            end
            local function describe(record)
              if record == nil then return "same" end
              local keys = {}
              for key in pairs(record[real] or {}) do keys[#keys + 1] = tostring(key) end
              table.sort(keys)
              return table.concat(keys, ",")
            end
            local first, firstCount = read(nil, nil, function() local _ = state.count; _ = state.items; _ = state.count end)
            local again = read(first, firstCount, function() local _ = state.items; _ = state.count; _ = state.items end)
            local fewer, fewerCount = read(first, firstCount, function() local _ = state.count end)
            local other, otherCount = read(fewer, fewerCount, function() local _ = state.count; _ = state.absent end)
            -- The same read again at once adds nothing; the next run notes it afresh.
            local repeated, repeatedCount = read(nil, nil, function() local _ = state.count; _ = state.count; _ = state.count end)
            local repeatedAgain = read(repeated, repeatedCount, function() local _ = state.count; _ = state.count end)
            B.note(real, "marker")
            return describe(first), firstCount, describe(again), describe(fewer), fewerCount, describe(other), otherCount,
              describe(repeated), repeatedCount, describe(repeatedAgain), B.mode() == B.CLOSED, handed.index
            """)
        // (A note outside a reader's run is dropped.)
        #expect(results == ["count,items", 2, "same", "count", 1, "absent,count", 2, "count", 1, "same", true, 0])
    }

    /// Every transaction and every reader's run is a call of its own: a proxy handed out in an earlier one — kept
    /// in an upvalue, say — is not used by the C paths (the Lua half refuses it), even though the caches still
    /// hold it, and even when it is the last one `__newindex` wrote through; reaching its table again in the new
    /// call makes it good again.
    @Test func aProxyIsGoodOnlyInTheCallThatReceivedIt() async throws {
        let results = try await run("""
            B.begin()
            state = B.proxy(real)
            local items = state.items
            local first = B.fresh(items)
            local item = items[1]
            item.done = true                    -- (`__newindex` remembers the last proxy it wrote through)
            local inFirst = handed.index + handed.newindex
            B.setmode(B.CLOSED)
            B.begin()
            local afterBegin = B.fresh(items)
            local _ = items[1]                  -- handed to the fallback
            local handedStale = handed.index
            items[1] = 2                        -- likewise
            item.done = false                   -- likewise, though it was the last written through
            local writes = handed.newindex
            state = B.proxy(real)
            local again = rawequal(state.items, items) and B.fresh(items)
            B.setmode(B.READ)
            local inReader = B.fresh(items)
            B.endread()
            B.rollback()
            return first, inFirst, afterBegin, handedStale, writes, again, inReader
            """)
        #expect(results == [true, 0, false, 1, 2, true, false])
    }

    /// `renew` forgets the proxy `__newindex` wrote through last: in the same call, a write through it once the
    /// caches were renewed (without it) is handed to the Lua half, as for any proxy they do not hold.
    @Test func renewForgetsTheProxyWrittenThroughLast() async throws {
        let results = try await run("""
            B.begin()
            state = B.proxy(real)
            state.count = 2                     -- (through C, which remembers `state`)
            local before = handed.newindex
            targets, proxies = B.renew(B, 10)
            pcall(function() state.count = 3 end) -- (the Lua half finds it in no cache either)
            local after = handed.newindex
            B.rollback()
            return before, after, real.count
            """)
        #expect(results == [0, 1, 1])
    }

    /// `renew` starts the caches afresh in every function of the barrier at once: what is made after it (a
    /// proxy, a claimed table, a record of where a table is) lands in the tables it returned, and `__index`,
    /// `__newindex`, `proxy` and `claim` all find it there; the count of proxies made starts over; the old caches
    /// keep what they had. A size out of range is refused.
    @Test func renewedCachesServeEveryFunction() async throws {
        let results = try await run("""
            B.begin()
            state = B.proxy(real)
            local oldItems = state.items
            local oldTargets, oldProxies = targets, proxies
            local madeBefore = B.made()
            local parents, parentKeys
            targets, proxies, parents, parentKeys = B.renew(B, 100) -- (the fallbacks read the new ones too)
            local fresh = B.made() == 0
            B.setmode(B.CLOSED)
            B.begin()
            state = B.proxy(real)
            local items = state.items                -- __index: a new proxy, recorded where it is
            local remade = not rawequal(items, oldItems) and targets[items] == real.items and proxies[real.items] == items
              and parents[real.items] == real and parentKeys[real.items] == "items"
            local item = items[1]
            item.done = true                         -- __newindex through the new caches: journaled in C
            local wrote = handed.newindex == 0 and real.items[1].done == true
            local mine = { n = 1 }
            local kept = B.claim(mine)
            local claimed = targets[mine] == kept and proxies[kept] == mine
            mine.n = 2
            local through = kept.n == 2 and handed.newindex == 0
            local oldKept = oldTargets[oldItems] == real.items and oldProxies[real.items] == oldItems
            B.rollback()
            local undone = real.items[1].done == false
            local tooLarge = pcall(B.renew, B, 1 << 40)
            local negative = pcall(B.renew, B, -1)
            return madeBefore, fresh, remade, wrote, claimed, through, oldKept, undone, tooLarge, negative
            """)
        #expect(results == [2, true, true, true, true, true, true, true, false, false])
    }

    /// `claim` makes a table a script stores the state's own: its contents move to a new (real) table, and the
    /// script's table, now empty, is that table's proxy for the running call.
    @Test func aClaimedTableBecomesTheProxyOfItsContents() async throws {
        let results = try await run("""
            B.begin()
            local mine = { title = "milk", [1] = "a", [2] = "b" }
            local kept = B.claim(mine)
            local fields = 0
            for _ in next, kept do fields = fields + 1 end
            local empty = next(mine) == nil
            local title = mine.title
            mine.title = "eggs"                 -- through the barrier: journaled
            B.journalview()
            local journaled = journal[\(CLUA_JOURNAL_TABLE)] == kept and journal[\(CLUA_JOURNAL_KEY)] == "title"
              and journal[\(CLUA_JOURNAL_OLD)] == "milk"
            B.rollback()
            return empty, fields, title, kept.title, targets[mine] == kept, proxies[kept] == mine, journaled,
              getmetatable(mine), B.fresh(mine)
            """)
        #expect(results == [true, 3, "milk", "milk", true, true, true, "test state", true])
    }

    @Test func aRunStopsAfterCommandsAndRefusalsAndSaysWhere() async throws {
        let results = try await run("""
            local function reduce(s, action)
              s.count = s.count + 1
              if action.type == "withCommand" then return nil, { "command" } end
            end
            local stop1, commands, dirty = B.run(reduce, { { type = "a" }, { type = "withCommand" }, { type = "b" } }, 1, 3, 0)
            local stop2, _, _, refused = B.run(reduce, { { type = "a" }, { notype = true } }, 1, 2, 0)
            local finished = B.run(reduce, { { type = "a" }, { type = "b" } }, 1, 2, 0)
            return stop1, commands[1], stop2, refused, finished, real.count, B.position()
            """)
        // 2 actions, then 1, then 2 applied: count 1 + 5.
        #expect(results == [2, "command", 2, true, 2, 6, 2])
    }

    /// With a flush function, a run calls it (its readers' turn) after each action that changed what a reader
    /// read (`observed`), and goes on — unless it returns true (what it gave must be read first) or fails.
    @Test func aRunFlushesAfterObservedActionsAndStopsWhereTheFlushAsks() async throws {
        let results = try await run("""
            local flushes = {}
            local function reduce(s, action)
              s.count = s.count + 1
              if action.type == "seen" then B.observed() end
            end
            local function flush()
              flushes[#flushes + 1] = real.count
              B.takedue()
              return real.count == 5
            end
            local list = { { type = "a" }, { type = "seen" }, { type = "a" }, { type = "seen" }, { type = "seen" } }
            local stop = B.run(reduce, list, 1, 5, 0, flush)
            local finished = B.run(reduce, list, 5, 5, 0, flush)
            local results = table.pack(B.run(reduce, { { type = "seen" }, { type = "a" } }, 1, 2, 0,
              function() error("the readers failed", 0) end))
            local position, commands, refused = results[\(CLUA_RUN_POSITION)], results[\(CLUA_RUN_COMMANDS)], results[\(CLUA_RUN_REFUSED)]
            local failure = results[\(CLUA_RUN_FLUSH_FAILURE)] -- (where `clua_state_layouts.h` puts it)
            return stop, table.concat(flushes, ","), finished, position, commands == nil, refused, failure, real.count
            """)
        // count 1 → 5 (stopped after the fourth action, whose flush asked), → 6, → 7 (the failing flush stops
        // the run after its action, which stays applied).
        #expect(results == [4, "3,5,6", 5, 1, true, false, "the readers failed", 7])
    }

    /// `flushdue`, a run's flush in C: every reader due runs once (`subscriptions` excepted), its outcome appended
    /// to `flushed`; a flat value that reads what it read last time never leaves C, and the rest goes to the Lua
    /// side — a first record of reads (`indexreads`), a value holding state tables (`finishread`: the run stops
    /// there, for the host to convert it), a reader that raised (`failedread`, its message kept), a child's reader
    /// (`runreader`).
    @Test func aRunsFlushInCRunsTheReadersDueAndHandsTheRestToLua() async throws {
        let results = try await run("""
            dependents[real] = { count = { props = true, table = true, boom = true, child = true, subscriptions = true } }
            local FN, CHILD = \(CLUA_READER_FN), \(CLUA_READER_CHILD)
            readers.props = { [FN] = function(s) return { count = s.count } end }
            readers.table = { [FN] = function(s) return s.items end }
            readers.boom = { [FN] = function(s) local _ = s.count; error("props failed", 0) end }
            readers.child = { [FN] = function() end, [CHILD] = 1 }
            readers.subscriptions = { [FN] = function() error("the store runs it") end }
            local function reduce(s) s.count = s.count + 1 end
            local function outcome()
              local seen = {}
              for i = 1, B.flushedcount() do
                local value = flushed.values[i]
                if type(value) == "table" then value = value.count or (value[1] ~= nil and "items") end
                seen[#seen + 1] = flushed.ids[i] .. "=" .. tostring(value) .. (flushed.failed[i] and "!" or "")
                flushed.ids[i], flushed.values[i], flushed.failed[i] = nil, nil, nil
              end
              B.flushedcount(0)
              table.sort(seen)
              return table.concat(seen, " ")
            end
            local stop = B.run(reduce, { { type = "a" }, { type = "a" } }, 1, 2, 0, B.flushdue)
            local first = outcome()
            local handedFirst = handed.runreader .. handed.finishread .. handed.indexreads .. handed.failedread
            readers.table, dependents[real].count.table = nil, nil
            local again = B.run(reduce, { { type = "a" } }, 1, 1, 0, B.flushdue)
            local second = outcome()
            local handedSecond = handed.runreader .. handed.finishread .. handed.indexreads .. handed.failedread
            return stop, first, handedFirst, again, second, handedSecond, B.mode() == B.CLOSED, B.duecount() == 0
            """)
        #expect(results == [1, "boom=props failed! child=ran in Lua props=2 table=items", "1111",
                            1, "boom=props failed! child=ran in Lua props=3", "2112", true, true])
    }

    /// A write to a key some reader read marks that key's readers due, and those of all of the table, once each,
    /// in `__newindex` itself, and says so to a run (its flush is called after that action); `takedue` hands the
    /// list over and empties the set. A write nobody reads marks nothing; `markdue` marks a set's readers.
    @Test func changesMarkTheirReadersDueOnceAndAreHandedOverOnce() async throws {
        let results = try await run("""
            dependents[real] = { count = { props = true, selector = true }, [ALL] = { whole = true } }
            local flushes = {}
            local function reduce(s, action)
              if action.type == "count" then
                s.count = s.count + 1
                s.count = s.count + 1
              else
                s.items[1].done = not s.items[1].done
              end
            end
            B.run(reduce, { { type = "count" }, { type = "items" }, { type = "count" } }, 1, 3, 0, function()
              local list, count = B.takedue()
              local ids = {}
              for i = 1, count do ids[i] = list[i] end
              table.sort(ids)
              flushes[#flushes + 1] = real.count .. ": " .. count .. " " .. table.concat(ids, ",") .. " "
                .. B.duecount() .. " " .. tostring(next(isDue) == nil)
              return false
            end)
            B.run(reduce, { { type = "items" } }, 1, 1, 0)
            local afterItems = B.duecount()
            B.run(reduce, { { type = "count" } }, 1, 1, 0)
            local afterCount = B.duecount()
            B.markdue({ props = true, other = true })
            return table.concat(flushes, "; "), afterItems, afterCount, B.duecount()
            """)
        #expect(results == ["3: 3 props,selector,whole 0 true; 5: 3 props,selector,whole 0 true", 0, 3, 4])
    }

    @Test func aFailingActionOfARunLeavesItsWritesInTheJournal() async throws {
        let results = try await run("""
            local function reduce(s, action)
              s.count = s.count + 10
              if action.type == "fail" then error("boom", 0) end
            end
            local ok, message = pcall(B.run, reduce, { { type = "a" }, { type = "fail" } }, 1, 2, 0)
            local failedAt, before = B.position(), real.count
            B.rollback()
            return ok, message, failedAt, before, real.count
            """)
        #expect(results == [false, "boom", 2, 21, 11])
    }

    @Test func missingFieldsAreNamed() async throws {
        let results = try await run("""
            local ok, message = pcall(makebarrier, { targets = {}, proxies = {}, meta = {}, weakkeys = {}, weakall = {}, parents = {}, parentkeys = {},
              due = {}, isdue = {}, moved = {}, movedindex = {}, left = {}, leftseen = {} })
            return ok, message
            """)
        #expect(results[0] == false)
        #expect(results[1].string?.hasSuffix("makebarrier: index is missing") == true)
    }
}
