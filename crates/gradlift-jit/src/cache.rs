//! The compile cache of a [`crate::Jit`]: what the JIT's user built from a
//! program's text (a parsed program, a compiled function or gradient),
//! kept under a key that names the text and everything else the result
//! depends on, so that defining the same thing again costs a lookup.
//!
//! **What it guarantees.** [`Cache::get_or_build`] returns either what
//! `build` returns now or a clone of what an earlier `build` returned
//! under the same key in the same `Jit`. The caller makes the key name
//! every input of `build` (the text, the file name its messages cite, the
//! function, what is derived, the options); the `Jit`'s own settings are
//! not part of the key because changing one (`Jit::threads`, …) empties
//! the cache. Errors are not kept: a failed build is built again next
//! time. Two threads asking for the same missing key may both build it;
//! the last to finish is kept, and both results are equally valid.
//!
//! Entries live as long as the `Jit` (or until [`Cache::clear`]): a
//! process that compiles an unbounded stream of distinct programs turns
//! the cache off (`Jit::cache(false)`).

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Built results by key, with counts of hits and misses.
pub struct Cache {
    on: bool,
    entries: Mutex<HashMap<String, Arc<dyn Any + Send + Sync>>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// How a cache has been used: lookups that found an entry, lookups that
/// built one, and the entries held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that ran their build (including failed ones and all
    /// lookups of a cache that is off).
    pub misses: u64,
    /// Entries held.
    pub entries: usize,
}

/// How a disk cache ([`crate::Jit::disk_cache`]) has been used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Functions loaded from the directory.
    pub hits: u64,
    /// Functions compiled because no usable entry was there.
    pub misses: u64,
    /// Entries written.
    pub writes: u64,
    /// Entries that could not be written (the directory refused them, or
    /// the code holds a relocation the format does not store).
    pub failed_writes: u64,
    /// Entries found but not used: damaged, or naming what this process
    /// does not provide (each is compiled again and overwritten).
    pub damaged: u64,
}

impl Cache {
    /// An empty cache; `on` false keeps nothing.
    pub fn new(on: bool) -> Cache {
        Cache {
            on,
            entries: Mutex::new(HashMap::new()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Whether it keeps what is built.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// The entry under `key` if it holds a `T`, or else `build()`'s result,
    /// kept under `key` when it is `Ok`.
    pub fn get_or_build<T, E>(
        &self,
        key: &str,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E>
    where
        T: Clone + Send + Sync + 'static,
    {
        if self.on {
            let found = self.lock().get(key).cloned();
            if let Some(t) = found.as_deref().and_then(|a| a.downcast_ref::<T>()) {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(t.clone());
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let built = build()?;
        if self.on {
            self.lock().insert(key.to_string(), Arc::new(built.clone()));
        }
        Ok(built)
    }

    /// Drops every entry (the counts stay).
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// The counts so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.lock().len(),
        }
    }

    /// The entries; a panic while the lock was held (in a `clone`) left
    /// the map itself consistent, so a poisoned lock is taken as it is.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<dyn Any + Send + Sync>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_built_once_and_errors_are_not_kept() {
        let cache = Cache::new(true);
        let mut builds = 0;
        for _ in 0..3 {
            let v: Result<u32, ()> = cache.get_or_build("a", || {
                builds += 1;
                Ok(7)
            });
            assert_eq!(v, Ok(7));
        }
        assert_eq!(builds, 1);
        for _ in 0..2 {
            let e: Result<u32, &str> = cache.get_or_build("b", || Err("no"));
            assert_eq!(e, Err("no"));
        }
        assert_eq!(
            cache.stats(),
            CacheStats {
                hits: 2,
                misses: 3,
                entries: 1
            }
        );
        cache.clear();
        assert_eq!(cache.stats().entries, 0);
    }

    #[test]
    fn a_cache_that_is_off_builds_every_time() {
        let cache = Cache::new(false);
        let mut builds = 0;
        for _ in 0..2 {
            let _: Result<u32, ()> = cache.get_or_build("a", || {
                builds += 1;
                Ok(1)
            });
        }
        assert_eq!(builds, 2);
        assert_eq!(cache.stats().entries, 0);
    }

    #[test]
    fn an_entry_of_another_type_is_built_again() {
        let cache = Cache::new(true);
        let _: Result<u32, ()> = cache.get_or_build("a", || Ok(1));
        let s: Result<String, ()> = cache.get_or_build("a", || Ok("s".into()));
        assert_eq!(s.as_deref(), Ok("s"));
    }
}
