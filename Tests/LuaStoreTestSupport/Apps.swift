/// Apps more than one test target runs.
public enum TestApps {
    /// A counter that adds each action's `by` and keeps the count's parity: an action changes one field, two,
    /// or (with `by = 0`) none, so a journal's records come with gaps.
    public static let countingBy = """
        local app = {}
        function app.init() return { count = 0, odd = false } end
        function app.reduce(state, action)
          state.count = state.count + action.by
          state.odd = state.count % 2 == 1
        end
        function app.props(state) return { count = state.count } end
        return app
        """

    /// An action for each way an action can fail (the transaction matrix's): every failure first changes the state
    /// (`count + 1000`), so a failure left applied shows in the props.
    public static let failingKinds = #"""
    local app = {}
    function app.init() return { count = 0, list = {} } end
    local failures = {
      error = function(state) error("refused on purpose") end,
      notText = function(state) state.s = "\xff\xfe" end,
      notTextKey = function(state) state["\xff"] = 1 end,
      notTextInside = function(state) state.t = { x = { "\xc0\x80" } } end,
      notTextInList = function(state) state.list[#state.list + 1] = "ok"; state.list[#state.list + 1] = "\xed\xa0\x80" end,
      func = function(state) state.f = print end,
      cycle = function(state) local t = {} t.self = t state.c = t end,
      deep = function(state) local t = {} local top = t for _ = 1, 300 do t.next = {} t = t.next end state.d = top end,
      nan = function(state) state.n = 0 / 0 end,
      budget = function(state) while true do end end,
      -- Commands that cannot even be converted (the action committed in the VM before they were read).
      commandFunction = function(state) return { { kind = print } } end,
      commandNotText = function(state) return { { kind = "log", message = "\xff" } } end,
      commandCycle = function(state) local c = { kind = "log" } c.again = c return { c } end,
      commandTableKey = function(state) return { { kind = "log", [{}] = 1 } } end,
      commandUnknown = function(state) return { { kind = "no such kind" } } end,
    }
    ---@class Act
    ---@field type "add"|"error"|"notText"|"notTextKey"|"notTextInside"|"notTextInList"|"func"|"cycle"|"deep"|"nan"|"budget"|"commandFunction"|"commandNotText"|"commandCycle"|"commandTableKey"|"commandUnknown"

    ---@param action Act
    function app.reduce(state, action)
      if action.type == "add" then
        state.count = state.count + 1
      else
        state.count = state.count + 1000
        return nil, failures[action.type](state)
      end
    end
    function app.props(state) return { count = state.count, keys = #state.list } end
    return app
    """#

    /// (`undeclared`: a type its contract does not declare, refused before its reducer runs.)
    public static let failureKinds = ["error", "notText", "notTextKey", "notTextInside", "notTextInList", "func", "cycle", "deep", "nan", "budget",
                                      "commandFunction", "commandNotText", "commandCycle", "commandTableKey", "commandUnknown", "undeclared"]

    /// `add`, then each failure between two `add`s (`failingKinds`' actions): the count ends at the number of `add`s.
    public static var failureLines: [String] {
        var lines = [#"{"type":"add"}"#]
        for kind in failureKinds { lines += [#"{"type":"\#(kind)"}"#, #"{"type":"add"}"#] }
        return lines
    }
}
