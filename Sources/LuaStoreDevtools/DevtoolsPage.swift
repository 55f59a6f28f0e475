/// The devtools' page: `Page/devtools.html` (its CSS and script inline), embedded into the binary at build
/// time — no other file, CDN or network fetch; it works offline.
enum DevtoolsPage {
    static var html: String { EmbeddedLua.devtoolsHtml.source }
}
