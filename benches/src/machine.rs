//! What the numbers were measured on: CPU model, features, cores, memory, OS, load, and the
//! versions of the contenders. Read from `/proc` and `/etc/os-release` where present.

use std::time::{SystemTime, UNIX_EPOCH};

/// The machine and build a report was measured on.
#[derive(Clone, Debug, Default)]
pub struct Machine {
    pub cpu_model: String,
    /// qkern's detected CPU features (`qkern_cpu::features()`).
    pub features: String,
    /// The CPU paths qkern can run here, and the default one.
    pub cpu_paths: String,
    pub default_path: String,
    /// Logical CPUs this process may use.
    pub logical_cpus: usize,
    /// "cpu cores" and "siblings" of /proc/cpuinfo, and the number of sockets seen.
    pub topology: String,
    pub memory: String,
    pub os: String,
    pub kernel: String,
    /// The GPU and driver of any GPU backend measured ("none" for CPU runs).
    pub gpu: String,
    /// /proc/loadavg when the run started and ended.
    pub load_start: String,
    pub load_end: String,
    pub ggml: String,
    pub candle: String,
    pub qkern: String,
    /// UTC time the run started (`YYYY-MM-DD HH:MM:SS UTC`).
    pub started: String,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn cpuinfo_field(info: &str, key: &str) -> Option<String> {
    info.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// The current load average (`/proc/loadavg`'s first three fields).
pub fn loadavg() -> String {
    read("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

impl Machine {
    /// Detect this machine (cheap: a few small files).
    pub fn detect() -> Machine {
        let info = read("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo_field(&info, "model name").unwrap_or_else(|| std::env::consts::ARCH.to_string());
        let sockets = {
            let mut ids: Vec<&str> = info
                .lines()
                .filter_map(|l| l.split_once(':').filter(|(k, _)| k.trim() == "physical id").map(|(_, v)| v.trim()))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids.len().max(1)
        };
        let topology = format!(
            "{} socket(s), cpu cores {}, siblings {}",
            sockets,
            cpuinfo_field(&info, "cpu cores").unwrap_or_else(|| "?".into()),
            cpuinfo_field(&info, "siblings").unwrap_or_else(|| "?".into())
        );
        let memory = read("/proc/meminfo")
            .and_then(|m| cpuinfo_field(&m, "MemTotal"))
            .and_then(|v| v.trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| format!("{:.1} GiB", kb as f64 / (1u64 << 20) as f64))
            .unwrap_or_else(|| "unknown".into());
        let os = read("/etc/os-release")
            .and_then(|s| {
                s.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string()))
            })
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        let kernel = read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default();
        let paths: Vec<String> = qkern_cpu::available_paths().iter().map(|p| format!("cpu-{p}")).collect();
        let default_path = match qkern_cpu::default_path() {
            Ok(p) => format!("cpu-{p}"),
            Err(e) => format!("error: {e}"),
        };
        Machine {
            cpu_model,
            features: qkern_cpu::features().to_string(),
            cpu_paths: paths.join(" "),
            default_path,
            logical_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            topology,
            memory,
            os,
            kernel,
            gpu: "none (CPU backends only)".into(),
            load_start: loadavg(),
            load_end: String::new(),
            ggml: crate::contenders::ggml_version(),
            candle: crate::contenders::candle_version(),
            qkern: format!("qkern {} (git {})", env!("CARGO_PKG_VERSION"), git_head()),
            started: utc_now(),
        }
    }

    /// One line for CSV rows and chart titles.
    pub fn short(&self) -> String {
        format!("{}, {} CPUs, {}, {}", self.cpu_model, self.logical_cpus, self.memory, self.features)
    }

    /// A file-name-safe name: the CPU model's words and the CPU count (`amd-epyc-2cpu`).
    pub fn slug(&self) -> String {
        let words: Vec<String> = self
            .cpu_model
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty() && !matches!(w.to_ascii_lowercase().as_str(), "r" | "tm" | "cpu" | "processor"))
            .take(4)
            .map(|w| w.to_ascii_lowercase())
            .collect();
        format!("{}-{}cpu", words.join("-"), self.logical_cpus)
    }

    /// `key: value` lines (machine.txt, and the head of the Markdown report).
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        vec![
            ("started", self.started.clone()),
            ("cpu", self.cpu_model.clone()),
            ("features (qkern_cpu::features)", self.features.clone()),
            ("qkern cpu paths", format!("{} (default {})", self.cpu_paths, self.default_path)),
            ("logical cpus", self.logical_cpus.to_string()),
            ("topology", self.topology.clone()),
            ("memory", self.memory.clone()),
            ("os", format!("{} (kernel {})", self.os, self.kernel)),
            ("gpu", self.gpu.clone()),
            ("load average at start", self.load_start.clone()),
            ("load average at end", self.load_end.clone()),
            ("qkern", self.qkern.clone()),
            ("ggml", self.ggml.clone()),
            ("candle", self.candle.clone()),
        ]
    }
}

/// The git commit the benchmark was built from (build.rs; "unknown" without git), marked
/// where tracked files differed from it.
fn git_head() -> String {
    env!("QKERN_GIT_HEAD").to_string()
}

/// Now as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc_now() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
}

/// Today's UTC date as `YYYY-MM-DD`.
pub fn utc_date() -> String {
    utc_now()[..10].to_string()
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(utc_date().len(), 10);
    }

    #[test]
    fn slug_is_file_safe() {
        let m = Machine { cpu_model: "AMD EPYC 7B13 64-Core Processor".into(), logical_cpus: 2, ..Default::default() };
        assert_eq!(m.slug(), "amd-epyc-7b13-64-2cpu");
        assert!(Machine::detect().slug().chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    }
}
