//! The embedded front-end: one page, one script, one stylesheet, compiled into the binary
//! (no build step, nothing loaded from elsewhere).

/// The page shell. `{{HEAD}}` and `{{BODY_END}}` are filled by the served page and the export.
pub(crate) const INDEX_HTML: &str = include_str!("../assets/index.html");
/// The application script (plain JavaScript).
pub const APP_JS: &str = include_str!("../assets/app.js");
/// The stylesheet.
pub const APP_CSS: &str = include_str!("../assets/app.css");

/// The page as the server sends it: assets linked from this origin.
pub(crate) fn served_page() -> String {
    INDEX_HTML
        .replace("{{HEAD}}", r#"<link rel="stylesheet" href="/app.css">"#)
        .replace("{{BODY_END}}", r#"<script src="/app.js"></script>"#)
}
