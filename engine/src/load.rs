//! Loading tensors into one page-aligned arena with positional reads, never mapping the file.
//!
//! A memory map of a model file keeps every page read charged to the process (RSS grows to
//! the file's size and stays there). Here the file is read with `pread` into an [`Arena`]
//! (anonymous memory, the way `malloc` gets large blocks: zero until written, charged only
//! as it is filled), so RSS during a load is the arena plus a little. The selected tensors
//! are grouped into segments of nearby file ranges (4 KiB aligned, so that `O_DIRECT` can
//! read them straight into the arena), cut into large chunks, and read by several threads.
//!
//! `O_DIRECT` is optional: where the file system refuses it (at `open` or at the first
//! read, `EINVAL`) the load falls back to buffered reads silently (the report says so).
//! `posix_fadvise(DONTNEED)` drops the file's pages from the page cache after the load when
//! asked. [`LoadReport`] gives bytes, seconds and GB/s per phase and the peak RSS (`VmHWM`).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::gguf::{Gguf, GgufError, TensorInfo};

/// Alignment of segments in the file and the arena (the `O_DIRECT` unit used).
pub const PAGE: u64 = 4096;
/// Selected tensors closer than this in the file are read as one segment (the gap too).
const MERGE_GAP: u64 = 1 << 20;
const HUGE: usize = 2 << 20;

/// How to load.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Reader threads.
    pub threads: usize,
    /// Bytes per read (rounded up to 4 KiB).
    pub chunk_bytes: usize,
    /// Try `O_DIRECT` (falls back to buffered reads where refused).
    pub direct: bool,
    /// `posix_fadvise(DONTNEED)` on the whole file after the load.
    pub drop_cache: bool,
    /// `madvise(MADV_HUGEPAGE)` on the arena (fewer page faults; RSS rounds to 2 MiB).
    pub huge_pages: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        LoadOptions { threads: n.clamp(1, 8), chunk_bytes: 8 << 20, direct: false, drop_cache: false, huge_pages: true }
    }
}

/// Errors of a load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> LoadError + 'a {
    move |source| LoadError::Io { what, path: path.to_path_buf(), source }
}

/// One zeroed, page-aligned (2 MiB-aligned when large) block of anonymous memory.
pub struct Arena {
    ptr: NonNull<u8>,
    len: usize,
    /// The mapping: `map_len` bytes from `ptr`.
    map_len: usize,
}

// SAFETY: the arena owns its memory exclusively; `&Arena` only gives shared slices.
unsafe impl Send for Arena {}
unsafe impl Sync for Arena {}

impl Arena {
    /// `len` zero bytes.
    pub fn new(len: usize, huge_pages: bool) -> io::Result<Arena> {
        let want = len.max(1).div_ceil(PAGE as usize) * PAGE as usize;
        let align = if want >= HUGE { HUGE } else { PAGE as usize };
        let total = want + align - PAGE as usize;
        // SAFETY: an anonymous private mapping with no address hint; checked for failure.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p as usize;
        let start = base.div_ceil(align) * align;
        // SAFETY: trimming the unaligned head and the tail of the mapping made above.
        unsafe {
            if start > base {
                libc::munmap(p, start - base);
            }
            let end = start + want;
            if base + total > end {
                libc::munmap(end as *mut libc::c_void, base + total - end);
            }
            if huge_pages && want >= HUGE {
                // Advice only: ignored where THP is off.
                libc::madvise(start as *mut libc::c_void, want, libc::MADV_HUGEPAGE);
            }
        }
        let ptr = NonNull::new(start as *mut u8).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Arena { ptr, len, map_len: want })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping holds `map_len >= len` initialised (zero or written) bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The whole mapping (the length rounded up to 4 KiB).
    fn padded_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.map_len) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping this arena owns.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.map_len);
        }
    }
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Arena({} bytes)", self.len)
    }
}

/// One timed phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub name: String,
    pub bytes: u64,
    pub seconds: f64,
}

impl Phase {
    pub fn gbps(&self) -> f64 {
        if self.seconds > 0.0 { self.bytes as f64 / self.seconds / 1e9 } else { 0.0 }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:<12} {:>10} in {:>9.4} s  {:>7.2} GB/s", self.name, mib(self.bytes), self.seconds, self.gbps())
    }
}

/// `n` bytes as MiB.
pub fn mib(n: u64) -> String {
    format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
}

/// What a load did.
#[derive(Clone, Debug)]
pub struct LoadReport {
    pub phases: Vec<Phase>,
    /// `buffered`, `O_DIRECT`, or `O_DIRECT refused (...): buffered`.
    pub mode: String,
    pub threads: usize,
    pub chunk_bytes: usize,
    pub segments: usize,
    pub tensors: usize,
    pub arena_bytes: u64,
    /// VmRSS before the load.
    pub rss_before: Option<u64>,
    /// VmHWM after the load (the process's peak; see [`reset_peak_rss`]).
    pub peak_rss: Option<u64>,
    /// VmRSS after the load.
    pub rss_after: Option<u64>,
}

impl LoadReport {
    /// The phase named `name`.
    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let opt = |v: Option<u64>| v.map_or("?".to_string(), mib);
        writeln!(
            f,
            "load: {} tensors in {} segments, arena {}, {}, {} threads, {} reads",
            self.tensors,
            self.segments,
            mib(self.arena_bytes),
            self.mode,
            self.threads,
            mib(self.chunk_bytes as u64)
        )?;
        for p in &self.phases {
            writeln!(f, "  {p}")?;
        }
        write!(
            f,
            "  RSS before {}, peak (VmHWM) {}, after {}",
            opt(self.rss_before),
            opt(self.peak_rss),
            opt(self.rss_after)
        )
    }
}

/// Tensors loaded into an arena, with the file's metadata.
pub struct LoadedModel {
    pub path: PathBuf,
    pub gguf: Gguf,
    pub arena: Arena,
    /// Per tensor of `gguf.tensors`: its bytes in the arena, if selected.
    placement: Vec<Option<Range<usize>>>,
    pub report: LoadReport,
}

impl LoadedModel {
    /// The arena bytes of tensor `i` of `gguf.tensors`, if it was loaded.
    pub fn bytes_of(&self, i: usize) -> Option<&[u8]> {
        let r = self.placement.get(i)?.clone()?;
        self.arena.as_slice().get(r)
    }

    /// A loaded tensor by name: its info and bytes.
    pub fn tensor(&self, name: &str) -> Option<(&TensorInfo, &[u8])> {
        let i = self.gguf.tensors.iter().position(|t| t.name == name)?;
        Some((&self.gguf.tensors[i], self.bytes_of(i)?))
    }

    /// Names of the loaded tensors.
    pub fn loaded(&self) -> impl Iterator<Item = &TensorInfo> {
        self.gguf.tensors.iter().zip(&self.placement).filter(|(_, p)| p.is_some()).map(|(t, _)| t)
    }
}

impl std::fmt::Debug for LoadedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoadedModel({}, {:?})", self.path.display(), self.arena)
    }
}

/// `VmRSS` and `VmHWM` of this process, in bytes.
pub fn rss() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = s.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Reset this process's `VmHWM` to its current RSS (`echo 5 > /proc/self/clear_refs`).
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Write back and drop `path`'s pages from the page cache (`fdatasync` +
/// `posix_fadvise(DONTNEED)`): the next read of it is cold.
pub fn drop_page_cache(path: &Path) -> io::Result<()> {
    let f = File::open(path)?;
    f.sync_data()?;
    fadvise_dontneed(&f)
}

fn fadvise_dontneed(f: &File) -> io::Result<()> {
    // SAFETY: advice on an open descriptor; the whole file (len 0 = to the end).
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if r != 0 { Err(io::Error::from_raw_os_error(r)) } else { Ok(()) }
}

/// A read plan: segments of the file (4 KiB aligned) laid out one after another in the arena.
struct Plan {
    segments: Vec<(Range<u64>, usize)>,
    arena_len: usize,
    placement: Vec<Option<Range<usize>>>,
    tensors: usize,
}

fn plan(g: &Gguf, select: &dyn Fn(&TensorInfo) -> bool) -> Plan {
    let mut idx: Vec<usize> = (0..g.tensors.len()).filter(|&i| select(&g.tensors[i])).collect();
    idx.sort_by_key(|&i| g.tensors[i].file_offset);
    let mut segments: Vec<(Range<u64>, usize)> = Vec::new();
    let mut placement = vec![None; g.tensors.len()];
    let mut arena_len = 0usize;
    let mut members: Vec<(usize, usize)> = Vec::new();
    for &i in &idx {
        let t = &g.tensors[i];
        let lo = t.file_offset / PAGE * PAGE;
        let hi = t.file_range().end.div_ceil(PAGE) * PAGE;
        match segments.last_mut() {
            Some((r, _)) if lo <= r.end + MERGE_GAP => r.end = r.end.max(hi),
            _ => {
                if let Some((r, _)) = segments.last() {
                    arena_len += (r.end - r.start) as usize;
                }
                segments.push((lo..hi, arena_len));
            }
        }
        members.push((i, segments.len() - 1));
    }
    if let Some((r, _)) = segments.last() {
        arena_len += (r.end - r.start) as usize;
    }
    for (i, s) in members {
        let t = &g.tensors[i];
        let (r, at) = &segments[s];
        let start = at + (t.file_offset - r.start) as usize;
        placement[i] = Some(start..start + t.bytes as usize);
    }
    Plan { segments, arena_len, placement, tensors: idx.len() }
}

/// Parse `path` and load the tensors `select` picks.
pub fn load(path: &Path, select: &dyn Fn(&TensorInfo) -> bool, opts: &LoadOptions) -> Result<LoadedModel, LoadError> {
    let t0 = Instant::now();
    let g = Gguf::open(path)?;
    let parse = Phase { name: "parse".into(), bytes: g.data_offset, seconds: t0.elapsed().as_secs_f64() };
    let mut m = load_parsed(path, g, select, opts)?;
    m.report.phases.insert(0, parse);
    Ok(m)
}

/// Load the tensors `select` picks from `path`, already parsed as `g`.
pub fn load_parsed(
    path: &Path,
    g: Gguf,
    select: &dyn Fn(&TensorInfo) -> bool,
    opts: &LoadOptions,
) -> Result<LoadedModel, LoadError> {
    let rss_before = rss().map(|r| r.0);
    let p = plan(&g, select);
    let t0 = Instant::now();
    let mut arena = Arena::new(p.arena_len, opts.huge_pages).map_err(io_err("allocating the arena for", path))?;
    let alloc = Phase { name: "alloc".into(), bytes: p.arena_len as u64, seconds: t0.elapsed().as_secs_f64() };

    let file = File::open(path).map_err(io_err("opening", path))?;
    let direct = if opts.direct {
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path).map_err(|e| e.to_string())
    } else {
        Err(String::new())
    };
    let t0 = Instant::now();
    let (bytes, refused) = read_segments(&file, direct.as_ref().ok(), g.file_len, &p.segments, &mut arena, opts)
        .map_err(io_err("reading", path))?;
    let read = Phase { name: "read".into(), bytes, seconds: t0.elapsed().as_secs_f64() };
    let mode = match (&direct, refused) {
        (Err(e), _) if opts.direct => format!("O_DIRECT refused at open ({e}): buffered"),
        (Err(_), _) => "buffered".to_string(),
        (Ok(_), Some(e)) => format!("O_DIRECT refused at read ({e}): buffered"),
        (Ok(_), None) => "O_DIRECT".to_string(),
    };
    let mut phases = vec![alloc, read];
    if opts.drop_cache {
        let t0 = Instant::now();
        fadvise_dontneed(&file).map_err(io_err("dropping the page cache of", path))?;
        phases.push(Phase { name: "drop-cache".into(), bytes: g.file_len, seconds: t0.elapsed().as_secs_f64() });
    }
    let after = rss();
    let report = LoadReport {
        phases,
        mode,
        threads: opts.threads.max(1),
        chunk_bytes: chunk_len(opts),
        segments: p.segments.len(),
        tensors: p.tensors,
        arena_bytes: p.arena_len as u64,
        rss_before,
        peak_rss: after.map(|r| r.1),
        rss_after: after.map(|r| r.0),
    };
    Ok(LoadedModel { path: path.to_path_buf(), gguf: g, arena, placement: p.placement, report })
}

fn chunk_len(opts: &LoadOptions) -> usize {
    opts.chunk_bytes.max(1).div_ceil(PAGE as usize) * PAGE as usize
}

/// One read: a file offset and the arena bytes it fills.
type Job<'a> = (u64, &'a mut [u8]);

/// Read every segment into the arena on `opts.threads` threads; returns the bytes read and,
/// if `O_DIRECT` reads were refused, why.
///
/// The chunks are cut into one stripe of consecutive chunks per thread (about equal bytes).
/// Each thread reads its stripe front to back through its own open file description
/// (`/proc/self/fd/N` reopened, advised `POSIX_FADV_SEQUENTIAL`), so that the kernel's
/// readahead sees one sequential stream per thread: with one shared description and chunks
/// handed out in turn, the readahead state sees interleaved, apparently random reads, and
/// cold buffered loads measured 50-80 % of one plain sequential reader on this machine. A
/// thread done with its stripe takes chunks from the back of the others'.
fn read_segments(
    file: &File,
    direct: Option<&File>,
    file_len: u64,
    segments: &[(Range<u64>, usize)],
    arena: &mut Arena,
    opts: &LoadOptions,
) -> io::Result<(u64, Option<String>)> {
    let chunk = chunk_len(opts);
    // Cut the arena into one slice per chunk, in order (segments are laid out back to back).
    let mut jobs: Vec<Job> = Vec::new();
    let mut rest: &mut [u8] = arena.padded_mut();
    for (r, _) in segments {
        let mut off = r.start;
        while off < r.end {
            let n = ((r.end - off) as usize).min(chunk);
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
            jobs.push((off, head));
            rest = tail;
            off += n as u64;
        }
    }
    let threads = opts.threads.max(1).min(jobs.len().max(1));
    let total_bytes = jobs.iter().map(|j| j.1.len() as u64).sum::<u64>().max(1);
    let mut stripes: Vec<VecDeque<Job>> = (0..threads).map(|_| VecDeque::new()).collect();
    let mut before = 0u64;
    for job in jobs {
        let s = ((before * threads as u64 / total_bytes) as usize).min(threads - 1);
        before += job.1.len() as u64;
        stripes[s].push_back(job);
    }
    let stripes: Vec<Mutex<VecDeque<Job>>> = stripes.into_iter().map(Mutex::new).collect();
    let direct_ok = AtomicBool::new(direct.is_some());
    let refused: Mutex<Option<String>> = Mutex::new(None);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<io::Error>> = Mutex::new(None);
    let total = std::sync::atomic::AtomicU64::new(0);
    let next = |i: usize| -> Option<Job> {
        if let Some(j) = stripes[i].lock().ok().and_then(|mut q| q.pop_front()) {
            return Some(j);
        }
        (1..threads).find_map(|k| stripes[(i + k) % threads].lock().ok().and_then(|mut q| q.pop_back()))
    };
    let work = |i: usize| {
        // An own open file description (own readahead state); the shared one where that fails.
        let own = File::open(format!("/proc/self/fd/{}", file.as_raw_fd())).ok();
        let f = own.as_ref().unwrap_or(file);
        // SAFETY: advice on an open descriptor (errors ignored: it is only advice).
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL);
        }
        loop {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let Some((off, buf)) = next(i) else { return };
            match read_chunk(f, direct, &direct_ok, &refused, file_len, off, buf) {
                Ok(n) => {
                    total.fetch_add(n, Ordering::Relaxed);
                }
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    if let Ok(mut fe) = first_error.lock() {
                        fe.get_or_insert(e);
                    }
                    return;
                }
            }
        }
    };
    std::thread::scope(|s| {
        let work = &work;
        for i in 1..threads {
            s.spawn(move || work(i));
        }
        work(0);
    });
    if let Some(e) = first_error.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok((total.into_inner(), refused.into_inner().ok().flatten()))
}

/// Fill `buf` from file offset `off` (bytes past the end of the file stay zero).
fn read_chunk(
    file: &File,
    direct: Option<&File>,
    direct_ok: &AtomicBool,
    refused: &Mutex<Option<String>>,
    file_len: u64,
    off: u64,
    buf: &mut [u8],
) -> io::Result<u64> {
    let mut done = 0usize;
    while done < buf.len() {
        let at = off + done as u64;
        if at >= file_len {
            break;
        }
        let d = direct.filter(|_| direct_ok.load(Ordering::Relaxed));
        let r = match d {
            Some(f) => f.read_at(&mut buf[done..], at),
            None => file.read_at(&mut buf[done..], at),
        };
        match r {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("file ends before {file_len}"))),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if d.is_some() && e.raw_os_error() == Some(libc::EINVAL) => {
                // The file system takes O_DIRECT at open but not these reads: go buffered.
                direct_ok.store(false, Ordering::Relaxed);
                if let Ok(mut r) = refused.lock() {
                    r.get_or_insert(e.to_string());
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(done as u64)
}

/// The file span `[first tensor start, last tensor end)` of the tensors `select` picks.
pub fn span(g: &Gguf, select: &dyn Fn(&TensorInfo) -> bool) -> Range<u64> {
    let sel = g.tensors.iter().filter(|t| select(t) && t.bytes > 0);
    let lo = sel.clone().map(|t| t.file_offset).min().unwrap_or(0);
    let hi = sel.map(|t| t.file_range().end).max().unwrap_or(0);
    lo..hi
}

/// The baseline: one thread, plain `read` calls of `buf_bytes` from `range.start`, into a
/// fresh arena of the range's size (`fresh`, what a simple loader does) or into one reused
/// buffer of `buf_bytes` (the I/O alone, without first-touch page faults).
pub fn sequential_read(path: &Path, range: Range<u64>, buf_bytes: usize, fresh: bool) -> io::Result<Phase> {
    let t0 = Instant::now();
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(range.start))?;
    let len = (range.end - range.start) as usize;
    if fresh {
        let mut arena = Arena::new(len, true)?;
        for dst in arena.as_mut_slice().chunks_mut(buf_bytes.max(1)) {
            f.read_exact(dst)?;
        }
    } else {
        let mut buf = vec![0u8; buf_bytes.clamp(1, len.max(1))];
        let mut done = 0usize;
        while done < len {
            let n = (len - done).min(buf.len());
            f.read_exact(&mut buf[..n])?;
            done += n;
        }
    }
    let name = if fresh { "seq-read" } else { "seq-reused" };
    Ok(Phase { name: name.into(), bytes: len as u64, seconds: t0.elapsed().as_secs_f64() })
}

/// Our loader against plain sequential reads of the same bytes, cold (after
/// [`drop_page_cache`]) and warm (cached), all in this run, over several interleaved rounds
/// (the cold rate of a virtual disk varies by 2-3x from one read to the next here, so one
/// shot of each proves nothing). Each round: cold sequential and cold ours (in alternating
/// order), then warm sequential, warm ours, warm sequential into a reused buffer, then
/// ours with `O_DIRECT` (cold) where asked. The report gives the median and the best of
/// each and their ratios.
#[derive(Clone, Debug)]
pub struct LoadComparison {
    pub span_bytes: u64,
    pub rounds: usize,
    pub seq_cold: Vec<Phase>,
    pub seq_warm: Vec<Phase>,
    /// Sequential reads into one reused 16 MiB buffer (warm): the copy alone.
    pub seq_reused_warm: Vec<Phase>,
    pub ours_cold: Vec<LoadReport>,
    pub ours_warm: Vec<LoadReport>,
    /// With `O_DIRECT` (cold), where asked.
    pub ours_direct: Vec<LoadReport>,
    /// Whether dropping the page cache worked (else "cold" is not cold).
    pub cache_dropped: bool,
}

/// Bytes per plain read in the baseline.
pub const SEQ_READ_BYTES: usize = 16 << 20;

/// Median and maximum GB/s of phases.
fn med_max(v: &[Phase]) -> (f64, f64) {
    let mut g: Vec<f64> = v.iter().map(Phase::gbps).collect();
    g.sort_by(f64::total_cmp);
    if g.is_empty() {
        return (0.0, 0.0);
    }
    let n = g.len();
    let med = if n % 2 == 1 { g[n / 2] } else { (g[n / 2 - 1] + g[n / 2]) / 2.0 };
    (med, g[n - 1])
}

impl LoadComparison {
    pub fn run(
        path: &Path,
        select: &dyn Fn(&TensorInfo) -> bool,
        opts: &LoadOptions,
        rounds: usize,
    ) -> Result<LoadComparison, LoadError> {
        let g = Gguf::open(path)?;
        let r = span(&g, select);
        let buffered = LoadOptions { direct: false, drop_cache: false, ..opts.clone() };
        let mut cache_dropped = true;
        let mut drop_cache = || cache_dropped &= drop_page_cache(path).is_ok();
        let seq = |fresh| sequential_read(path, r.clone(), SEQ_READ_BYTES, fresh).map_err(io_err("reading", path));
        // VmHWM reset before each of our loads, so that its peak is that load's.
        let ours = |o: &LoadOptions| {
            reset_peak_rss();
            load_parsed(path, g.clone(), select, o).map(|m| m.report)
        };
        let mut c = LoadComparison {
            span_bytes: r.end - r.start,
            rounds: rounds.max(1),
            seq_cold: Vec::new(),
            seq_warm: Vec::new(),
            seq_reused_warm: Vec::new(),
            ours_cold: Vec::new(),
            ours_warm: Vec::new(),
            ours_direct: Vec::new(),
            cache_dropped: true,
        };
        for round in 0..rounds.max(1) {
            if round % 2 == 0 {
                drop_cache();
                c.seq_cold.push(seq(true)?);
                drop_cache();
                c.ours_cold.push(ours(&buffered)?);
            } else {
                drop_cache();
                c.ours_cold.push(ours(&buffered)?);
                drop_cache();
                c.seq_cold.push(seq(true)?);
            }
            // Cached now (the last cold read filled the cache).
            c.seq_warm.push(seq(true)?);
            c.ours_warm.push(ours(&buffered)?);
            c.seq_reused_warm.push(seq(false)?);
            if opts.direct {
                drop_cache();
                c.ours_direct.push(ours(&LoadOptions { direct: true, ..buffered.clone() })?);
            }
        }
        c.cache_dropped = cache_dropped;
        Ok(c)
    }

    /// Median and best GB/s of the sequential reads, cold.
    pub fn seq_cold_gbps(&self) -> (f64, f64) {
        med_max(&self.seq_cold)
    }
    pub fn seq_warm_gbps(&self) -> (f64, f64) {
        med_max(&self.seq_warm)
    }
    pub fn ours_cold_gbps(&self) -> (f64, f64) {
        med_max(&self.ours_cold.iter().map(read_phase).collect::<Vec<_>>())
    }
    pub fn ours_warm_gbps(&self) -> (f64, f64) {
        med_max(&self.ours_warm.iter().map(read_phase).collect::<Vec<_>>())
    }
    pub fn ours_direct_gbps(&self) -> (f64, f64) {
        med_max(&self.ours_direct.iter().map(read_phase).collect::<Vec<_>>())
    }
}

fn read_phase(r: &LoadReport) -> Phase {
    r.phase("read").cloned().unwrap_or(Phase { name: "read".into(), bytes: 0, seconds: 0.0 })
}

impl std::fmt::Display for LoadComparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pct = |a: f64, b: f64| if b > 0.0 { a / b * 100.0 } else { 0.0 };
        let threads = self.ours_warm.first().map_or(0, |r| r.threads);
        let chunk = self.ours_warm.first().map_or(0, |r| r.chunk_bytes as u64);
        writeln!(
            f,
            "load vs sequential read: {} span, {} interleaved rounds; ours {} threads x {} preads, baseline 1 thread x {} reads{}",
            mib(self.span_bytes),
            self.rounds,
            threads,
            mib(chunk),
            mib(SEQ_READ_BYTES as u64),
            if self.cache_dropped { "" } else { " (page cache NOT dropped: cold is not cold)" }
        )?;
        writeln!(f, "  {:<34} {:>15} {:>15}", "median / best of the rounds", "cold GB/s", "warm GB/s")?;
        let row = |f: &mut std::fmt::Formatter<'_>, name: &str, c: Option<(f64, f64)>, w: Option<(f64, f64)>| {
            let cell = |v: Option<(f64, f64)>| v.map_or("-".to_string(), |(m, b)| format!("{m:.2} / {b:.2}"));
            writeln!(f, "  {name:<34} {:>15} {:>15}", cell(c), cell(w))
        };
        let (sc, sw) = (self.seq_cold_gbps(), self.seq_warm_gbps());
        let (oc, ow) = (self.ours_cold_gbps(), self.ours_warm_gbps());
        row(f, "sequential read (fresh buffer)", Some(sc), Some(sw))?;
        row(f, "sequential read (reused 16 MiB)", None, Some(med_max(&self.seq_reused_warm)))?;
        let mode = self.ours_warm.first().map_or("buffered".to_string(), |r| r.mode.clone());
        row(f, &format!("ours ({mode})"), Some(oc), Some(ow))?;
        if !self.ours_direct.is_empty() {
            let mode = self.ours_direct[0].mode.clone();
            row(f, &format!("ours ({mode})"), Some(self.ours_direct_gbps()), None)?;
        }
        writeln!(
            f,
            "  ours / sequential: cold {:.0} % (median) {:.0} % (best), warm {:.0} % (median) {:.0} % (best)",
            pct(oc.0, sc.0),
            pct(oc.1, sc.1),
            pct(ow.0, sw.0),
            pct(ow.1, sw.1)
        )?;
        if !self.ours_direct.is_empty() {
            let d = self.ours_direct_gbps();
            writeln!(
                f,
                "  ours O_DIRECT / sequential cold: {:.0} % (median) {:.0} % (best)",
                pct(d.0, sc.0),
                pct(d.1, sc.1)
            )?;
        }
        let peak =
            self.ours_cold.iter().chain(&self.ours_warm).chain(&self.ours_direct).filter_map(|r| r.peak_rss).max();
        write!(
            f,
            "  peak RSS (VmHWM, reset before each load) of our loads: {} (arena {}; includes what the process held before)",
            peak.map_or("?".into(), mib),
            mib(self.ours_warm.first().map_or(0, |r| r.arena_bytes))
        )
    }
}
