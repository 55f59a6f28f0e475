/// The devtools' page: `Page/devtools.html`, with `devtools.css` and `devtools.js` (written apart, for editors)
/// put inline where the page links them, embedded into the binary at build time — one document, no other file,
/// CDN or network fetch; it works offline.
enum DevtoolsPage {
    static let html: String = EmbeddedLua.devtoolsHtml.source
        .replacingOccurrences(of: #"<link rel="stylesheet" href="devtools.css">"#, with: "<style>\n" + EmbeddedLua.devtoolsCss.source + "</style>")
        .replacingOccurrences(of: #"<script src="devtools.js"></script>"#, with: "<script>\n" + EmbeddedLua.devtoolsJs.source + "</script>")
}
