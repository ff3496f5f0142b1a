//! A progress indication for long loads: a spinner with the elapsed time on standard error,
//! only when standard error is a terminal (nothing at all otherwise).

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a load runs before the spinner appears.
const GRACE: Duration = Duration::from_millis(250);

/// A running spinner; dropping it stops it and clears its line.
pub(crate) struct Spinner {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Spinner {
    /// Starts a spinner labelled `label` if standard error is a terminal.
    pub(crate) fn start(label: String) -> Spinner {
        let stop = Arc::new(AtomicBool::new(false));
        let handle = std::io::stderr().is_terminal().then(|| {
            let stop = stop.clone();
            std::thread::spawn(move || spin(&label, &stop))
        });
        Spinner { stop, handle }
    }
}

fn spin(label: &str, stop: &AtomicBool) {
    const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    let started = Instant::now();
    let mut shown = false;
    let mut frame = 0usize;
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(80));
        let elapsed = started.elapsed();
        if elapsed < GRACE {
            continue;
        }
        shown = true;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[2K{} {label} {:.1}s",
            FRAMES[frame % FRAMES.len()],
            elapsed.as_secs_f64()
        );
        let _ = err.flush();
        frame += 1;
    }
    if shown {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Runs `f` with a spinner labelled `label` on a terminal.
pub(crate) fn with_spinner<T>(label: impl Into<String>, f: impl FnOnce() -> T) -> T {
    // The label names a session: its control characters are shown, never sent.
    let spinner = Spinner::start(crate::output::escape_controls(&label.into()).into_owned());
    let result = f();
    drop(spinner);
    result
}
