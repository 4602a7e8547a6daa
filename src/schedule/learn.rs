//! Learning inside a build: units that compile the same code but for some numbers (a size
//! constant in the source or a `-D` value: what unrolls loops or instantiates templates, which
//! no source scan prices) are siblings. Once some of them have compiled, the ones still
//! waiting are re-ranked by what was measured: the cost is fitted against each number that
//! differs between the siblings, and the number that follows the cost best orders the rest,
//! longest first.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::runner::Rerank;
use crate::plan::CompileJob;

/// Sources larger than this are not compared (a generated unit of megabytes is no template
/// instance).
const MAX_SOURCE: u64 = 1 << 20;

/// How well a number must follow the measured costs (Pearson's r) to order the rest by it.
const MIN_FIT: f64 = 0.5;

/// Siblings measured before one still compiling counts as the one the build waits for: a
/// proportional guess from one is too weak to reorder the cores.
const MIN_MEASURED_FOR_WAIT: usize = 2;

/// How much longer than every other unfinished sibling a unit must be predicted to go on for
/// the build to wait for it alone.
const WAIT_MARGIN: f64 = 1.25;

/// A unit's code with its numbers taken out.
#[derive(Debug, Clone)]
struct Shape {
    /// The siblings' shared code (numbers masked), hashed.
    group: u64,
    /// The unit's numeric literals, in order (not the digits inside a name: `unit_07`).
    numbers: Vec<f64>,
    /// Where each number stands: its line, trimmed (for `-v`).
    lines: Vec<String>,
}

/// The build's siblings and what their compiles measured; re-ranks the runner's waiting units.
#[derive(Debug)]
pub struct Siblings {
    labels: Vec<String>,
    shapes: Vec<Option<Shape>>,
    /// Seconds each unit took to compile, once it has.
    measured: Mutex<Vec<Option<f64>>>,
    /// When each unit started compiling, once it has.
    started: Mutex<Vec<Option<Instant>>>,
}

impl Siblings {
    /// The siblings among `jobs` (by source text and `-D` values); a source that cannot be
    /// read has none.
    pub fn new(jobs: &[CompileJob]) -> Self {
        let shapes: Vec<Option<Shape>> = jobs.iter().map(shape_of_job).collect();
        let mut sizes: HashMap<u64, usize> = HashMap::new();
        for shape in shapes.iter().flatten() {
            *sizes.entry(shape.group).or_default() += 1;
        }
        // A unit with no sibling has nothing to learn from.
        let shapes = (shapes.into_iter())
            .map(|s| s.filter(|s| sizes.get(&s.group).copied().unwrap_or(0) > 1))
            .collect();
        Siblings {
            labels: jobs.iter().map(|j| j.label.clone()).collect(),
            shapes,
            measured: Mutex::new(vec![None; jobs.len()]),
            started: Mutex::new(vec![None; jobs.len()]),
        }
    }

    /// Whether any unit has a sibling.
    pub fn any(&self) -> bool {
        self.shapes.iter().any(Option::is_some)
    }

    /// The predicted seconds of each unit of `group` from the measured ones, and which of their
    /// numbers predicts them; `None` when no number follows the costs.
    fn predict(&self, group: u64, measured: &[Option<f64>]) -> Option<(Vec<(usize, f64)>, usize)> {
        let members: Vec<(usize, &Shape)> = (self.shapes.iter().enumerate())
            .filter_map(|(i, s)| s.as_ref().filter(|s| s.group == group).map(|s| (i, s)))
            .collect();
        let done: Vec<(usize, f64)> = (members.iter())
            .filter_map(|&(i, _)| measured[i].map(|m| (i, m)))
            .collect();
        let width = members.first()?.1.numbers.len();
        let varying: Vec<usize> = (0..width)
            .filter(|&p| {
                members
                    .iter()
                    .any(|(_, s)| s.numbers[p] != members[0].1.numbers[p])
            })
            .collect();
        let at = |i: usize, p: usize| self.shapes[i].as_ref().map_or(0.0, |s| s.numbers[p]);
        let (position, fit) = match varying.as_slice() {
            [] => return None,
            // One number differs and one sibling is measured: cost taken to grow with it.
            [p] if done.len() == 1 => (*p, Fit::proportional(at(done[0].0, *p), done[0].1)?),
            _ => (varying.iter())
                .filter_map(|&p| {
                    let points: Vec<(f64, f64)> =
                        done.iter().map(|&(i, y)| (at(i, p), y)).collect();
                    Fit::linear(&points).map(|f| (p, f))
                })
                .filter(|(_, f)| f.r >= MIN_FIT)
                .max_by(|a, b| a.1.r.total_cmp(&b.1.r))?,
        };
        let predicted = (members.iter())
            .map(|&(i, _)| (i, measured[i].unwrap_or_else(|| fit.at(at(i, position)))))
            .collect();
        Some((predicted, position))
    }
}

impl Siblings {
    /// Why the build waits for `unit` alone, if it does: it has not finished, at least
    /// [`MIN_MEASURED_FOR_WAIT`] of its siblings have, and the number their costs follow
    /// predicts it goes on [`WAIT_MARGIN`] times longer than every other sibling not finished
    /// (each one's prediction less the time it has compiled so far). Its device passes starting
    /// now then take the cores the others leave (`schedule::pass_split`).
    pub fn waited_for(&self, unit: usize) -> Option<String> {
        let group = self.shapes.get(unit)?.as_ref()?.group;
        let measured = self
            .measured
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if measured[unit].is_some() {
            return None;
        }
        let (predicted, position) = self.predict(group, &measured)?;
        let measured_n = (predicted.iter())
            .filter(|(i, _)| measured[*i].is_some())
            .count();
        if measured_n < MIN_MEASURED_FOR_WAIT {
            return None;
        }
        let started = self
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let left = |i: usize, total: f64| {
            let so_far = started[i].map_or(0.0, |t| t.elapsed().as_secs_f64());
            (total - so_far).max(0.0)
        };
        let total = predicted.iter().find(|(i, _)| *i == unit)?.1;
        let mine = left(unit, total);
        let next = (predicted.iter())
            .filter(|(i, _)| *i != unit && measured[*i].is_none())
            .map(|&(i, s)| left(i, s))
            .fold(0.0f64, f64::max);
        if mine <= 0.0 || mine < next * WAIT_MARGIN {
            return None;
        }
        let line = (self.shapes[unit].as_ref()).map_or("", |s| s.lines[position].as_str());
        Some(format!(
            "the build waits for this unit: predicted {mine:.1}s more ({total:.1}s in all) by a \
             number its siblings' costs follow ({measured_n} measured, `{line}`), the longest \
             other one not finished {next:.1}s more"
        ))
    }
}

impl Rerank for Siblings {
    fn started(&self, unit: usize) {
        let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = started.get_mut(unit) {
            *at = Some(Instant::now());
        }
    }

    fn finished(
        &self,
        finished: usize,
        elapsed: Duration,
        waiting: &mut [usize],
    ) -> Option<String> {
        let group = self.shapes.get(finished)?.as_ref()?.group;
        let measured = {
            let mut measured = self.measured.lock().unwrap_or_else(|e| e.into_inner());
            measured[finished] = Some(elapsed.as_secs_f64());
            measured.clone()
        };
        let (predicted, position) = self.predict(group, &measured)?;
        let seconds: HashMap<usize, f64> = predicted.into_iter().collect();
        // The group's waiting units, longest first, in the places the group holds.
        let places: Vec<usize> = (0..waiting.len())
            .filter(|&w| seconds.contains_key(&waiting[w]))
            .collect();
        let mut ranked: Vec<usize> = places.iter().map(|&w| waiting[w]).collect();
        let before = ranked.clone();
        ranked.sort_by(|a, b| seconds[b].total_cmp(&seconds[a]).then(a.cmp(b)));
        if ranked == before {
            return None;
        }
        for (&w, &unit) in places.iter().zip(&ranked) {
            waiting[w] = unit;
        }
        let measured_n = (measured.iter().enumerate())
            .filter(|(i, m)| m.is_some() && seconds.contains_key(i))
            .count();
        let next = ranked[0];
        let line = (self.shapes[next].as_ref()).map_or("", |s| s.lines[position].as_str());
        Some(format!(
            "re-ranked {} waiting units like `{}` by a number their costs follow ({} of them \
             measured): `{}` next, predicted {:.1}s (`{line}`)",
            ranked.len(),
            self.labels[finished],
            measured_n,
            self.labels[next],
            seconds[&next],
        ))
    }
}

/// A cost as a function of one number.
#[derive(Debug, Clone, Copy)]
struct Fit {
    intercept: f64,
    slope: f64,
    /// How well the number follows the costs (Pearson's r; 1 for a proportional guess).
    r: f64,
}

impl Fit {
    /// Cost proportional to the number, through the one point measured.
    fn proportional(x: f64, y: f64) -> Option<Fit> {
        (x > 0.0).then_some(Fit {
            intercept: 0.0,
            slope: y / x,
            r: 1.0,
        })
    }

    /// Least squares over `points` (number, seconds): at least two distinct numbers.
    fn linear(points: &[(f64, f64)]) -> Option<Fit> {
        let n = points.len() as f64;
        let (mx, my) = points
            .iter()
            .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
        let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
        for (x, y) in points {
            sxx += (x - mx) * (x - mx);
            sxy += (x - mx) * (y - my);
            syy += (y - my) * (y - my);
        }
        if points.len() < 2 || sxx <= 0.0 {
            return None;
        }
        let slope = sxy / sxx;
        // Every measured cost alike: the number does not explain them, nor contradict it.
        let r = if syy > 0.0 {
            sxy / (sxx * syy).sqrt()
        } else {
            0.0
        };
        Some(Fit {
            intercept: my - slope * mx,
            slope,
            r,
        })
    }

    fn at(&self, x: f64) -> f64 {
        (self.intercept + self.slope * x).max(0.0)
    }
}

fn shape_of_job(job: &CompileJob) -> Option<Shape> {
    let source = crate::files::read_regular(&job.source, MAX_SOURCE).ok()?;
    let mut text = String::from_utf8_lossy(&source).into_owned();
    for (name, value) in &job.defines {
        text.push_str(&format!("\n-D{name}={}", value.as_deref().unwrap_or("")));
    }
    // The flags name the unit's own source (`--orig_src_path_name=unseen/unit_3.cu`): masked
    // as the source's numbers are, and its file name left out.
    let name = job
        .source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let flags = job.flags.join(" ");
    let flags = match name.filter(|n| !n.is_empty()) {
        Some(name) => flags.replace(&name, "<source>"),
        None => flags,
    };
    text.push_str(&format!("\n{flags}"));
    let context = format!("{:?} {}", job.lang, job.compiler_id);
    Some(shape_of(&text, &context))
}

/// `text` with its numbers masked, grouped with `context` (what else must match: the language,
/// the compiler, the flags).
fn shape_of(text: &str, context: &str) -> Shape {
    use std::hash::{Hash, Hasher};
    let mut skeleton = String::with_capacity(text.len());
    let (mut numbers, mut lines) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let mut chars = line.char_indices().peekable();
        let mut in_name = false;
        while let Some((start, c)) = chars.next() {
            if c.is_whitespace() {
                // Numbers written at a fixed width pad with spaces: any run is one space.
                if !skeleton.ends_with(' ') {
                    skeleton.push(' ');
                }
                in_name = false;
                continue;
            }
            if !c.is_ascii_digit() {
                in_name = c.is_alphanumeric() || c == '_';
                skeleton.push(c);
                continue;
            }
            let mut end = start + 1;
            while let Some(&(i, d)) = chars.peek() {
                if !d.is_ascii_digit() {
                    break;
                }
                end = i + 1;
                chars.next();
            }
            skeleton.push('#');
            if !in_name {
                numbers.push(line[start..end].parse::<f64>().unwrap_or(0.0));
                lines.push(line.trim().to_string());
            }
        }
        skeleton.push('\n');
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (skeleton, context, numbers.len()).hash(&mut hasher);
    Shape {
        group: hasher.finish(),
        numbers,
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(index: usize, size: usize) -> String {
        format!(
            "#include <utility>\nconstexpr int kSize = {size:6};\nconstexpr int kUnroll = 512;\n\
             namespace unit_{index} {{ template <int I> __global__ void k(float*); }}\n"
        )
    }

    fn siblings(sizes: &[usize]) -> Siblings {
        let shapes: Vec<Option<Shape>> = (sizes.iter().enumerate())
            .map(|(i, &s)| Some(shape_of(&unit(i, s), "cuda")))
            .collect();
        Siblings {
            labels: (0..sizes.len()).map(|i| format!("unit_{i}.cu")).collect(),
            shapes,
            measured: Mutex::new(vec![None; sizes.len()]),
            started: Mutex::new(vec![None; sizes.len()]),
        }
    }

    #[test]
    fn a_unit_predicted_far_longer_than_every_other_unfinished_sibling_is_waited_for() {
        let s = siblings(&[16, 21, 29, 39, 224, 52]);
        // Nothing measured, then one: too little to say.
        assert_eq!(s.waited_for(4), None);
        let finish = |i: usize, secs: f64| {
            s.finished(i, Duration::from_secs_f64(secs), &mut []);
        };
        finish(0, 5.0);
        assert_eq!(s.waited_for(4), None, "one sibling measured");
        finish(1, 6.2);
        finish(2, 8.1);
        let why = s
            .waited_for(4)
            .expect("224 against 52 and 39 still compiling");
        assert!(why.contains("3 measured"), "{why}");
        assert!(why.contains("`constexpr int kSize =    224;`"), "{why}");
        // The others are not.
        assert_eq!(s.waited_for(5), None);
        assert_eq!(s.waited_for(3), None);
        // What is left counts: 52 kernels started long ago leave less than 224 just started.
        let s = siblings(&[16, 21, 29, 224, 300]);
        for (i, secs) in [(0, 5.0), (1, 6.2), (2, 8.1)] {
            s.finished(i, Duration::from_secs_f64(secs), &mut []);
        }
        assert!(
            s.waited_for(4).is_some(),
            "300 against 224, both not started"
        );
        s.started(3);
        s.started(4);
        let long_ago = Instant::now().checked_sub(Duration::from_secs(30));
        s.started.lock().unwrap()[4] = long_ago;
        let why = s.waited_for(3).expect("224 just started, 300 nearly done");
        assert!(why.contains("more ("), "{why}");
        assert_eq!(s.waited_for(4), None);
        // A finished unit is waited for no longer.
        finish(4, 50.0);
        assert_eq!(s.waited_for(4), None);
        // Two alike still compiling: neither alone.
        let s = siblings(&[16, 21, 29, 224, 224]);
        for (i, secs) in [(0, 5.0), (1, 6.2), (2, 8.1)] {
            s.finished(i, Duration::from_secs_f64(secs), &mut []);
        }
        assert_eq!((s.waited_for(3), s.waited_for(4)), (None, None));
    }

    #[test]
    fn units_alike_but_for_a_constant_and_the_digits_of_a_name_are_siblings() {
        let a = shape_of(&unit(3, 16), "cuda");
        let b = shape_of(&unit(12, 224), "cuda");
        assert_eq!(a.group, b.group);
        // kSize, kUnroll; not the digits of `unit_3`.
        assert_eq!(a.numbers, [16.0, 512.0]);
        assert_eq!(a.lines[0], "constexpr int kSize =     16;");
        assert_ne!(
            a.group,
            shape_of(&unit(3, 16), "c++").group,
            "another language"
        );
        let other = shape_of(&unit(3, 16).replace("float", "double"), "cuda");
        assert_ne!(a.group, other.group, "other code");
    }

    #[test]
    fn once_a_sibling_compiled_the_largest_constant_waiting_starts_next() {
        let learn = siblings(&[20, 40, 200, 60, 100]);
        // Unit 0 compiled in 2 s; 1..4 wait in source order (the next to start first).
        let mut waiting = vec![1, 2, 3, 4];
        let said = learn
            .finished(0, Duration::from_secs(2), &mut waiting)
            .expect("re-ranked");
        assert_eq!(waiting, [2, 4, 3, 1]);
        assert!(said.contains("`constexpr int kSize =    200;`"), "{said}");
        assert!(said.contains("`unit_2.cu` next, predicted 20.0s"), "{said}");
    }

    #[test]
    fn the_constant_that_follows_the_measured_costs_orders_the_rest() {
        // Two numbers differ: the first falls as the cost rises, the second follows it.
        let text = |a: usize, b: usize| format!("int a = {a}; int b = {b};\n");
        let shapes: Vec<Option<Shape>> = [(9, 10), (5, 30), (1, 50), (8, 90), (7, 5)]
            .iter()
            .map(|&(a, b)| Some(shape_of(&text(a, b), "x")))
            .collect();
        let learn = Siblings {
            labels: (0..5).map(|i| format!("u{i}")).collect(),
            shapes,
            measured: Mutex::new(vec![None; 5]),
            started: Mutex::new(vec![None; 5]),
        };
        // Two numbers differ, one unit measured: nothing tells them apart yet.
        let mut waiting = vec![2, 3, 4];
        assert_eq!(
            learn.finished(0, Duration::from_secs(1), &mut waiting),
            None
        );
        let said = learn.finished(1, Duration::from_secs(3), &mut waiting);
        assert_eq!(waiting, [3, 2, 4], "{said:?}");
        assert!(said.unwrap().contains("`int a = 8; int b = 90;`"));
    }

    #[test]
    fn units_whose_flags_name_their_own_source_are_siblings_as_a_build_plans_them() {
        let dir = tempfile::tempdir().unwrap();
        let jobs: Vec<CompileJob> = [(0, 16), (1, 224), (2, 64)]
            .iter()
            .map(|&(i, size)| {
                let name = format!("unit_{i}.cu");
                std::fs::write(dir.path().join(&name), unit(i, size)).unwrap();
                CompileJob {
                    label: format!("unseen/{name} [cuda]"),
                    lang: crate::plan::Lang::Cuda,
                    compiler: "nvcc".into(),
                    host_compiler: None,
                    source: dir.path().join(&name),
                    object: dir.path().join(format!("{name}.o")),
                    depfile: dir.path().join(format!("{name}.d")),
                    std: "c++20".into(),
                    include_dirs: Vec::new(),
                    system_include_dirs: Vec::new(),
                    defines: vec![("TORCH_EXTENSION_NAME".into(), Some("_x_1a2b".into()))],
                    // As the plan writes it (`plan/jobs.rs`).
                    flags: vec![format!("-Xcudafe=--orig_src_path_name=unseen/{name}")],
                    host_flags: Vec::new(),
                    gencodes: Vec::new(),
                    compiler_id: "nvcc 13.2".into(),
                }
            })
            .collect();
        let learn = Siblings::new(&jobs);
        assert!(learn.any());
        let mut waiting = vec![2, 1];
        let said = learn.finished(0, Duration::from_secs(1), &mut waiting);
        assert!(said.is_some(), "re-ranked");
        assert_eq!(waiting, [1, 2], "unit_1 (224) before unit_2 (64)");
        let mut other = jobs[2].clone();
        other.compiler_id = "nvcc 12.8".into();
        assert!(
            !Siblings::new(&[jobs[0].clone(), other]).any(),
            "another compiler"
        );
    }

    #[test]
    fn units_with_nothing_alike_keep_their_order() {
        let shapes = vec![
            Some(shape_of("int a = 1;", "x")),
            Some(shape_of("float b = 2;", "x")),
        ];
        let learn = Siblings {
            labels: vec!["a".into(), "b".into()],
            shapes,
            measured: Mutex::new(vec![None; 2]),
            started: Mutex::new(vec![None; 2]),
        };
        let mut waiting = vec![1];
        assert_eq!(
            learn.finished(0, Duration::from_secs(1), &mut waiting),
            None
        );
        assert_eq!(waiting, [1]);
    }
}
