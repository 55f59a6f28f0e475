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
}
