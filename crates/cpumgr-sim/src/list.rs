//! The engine's per-program lists: in id order, appended at the end, with finished programs
//! removed from anywhere, a few at a step.
//!
//! Removing entries from a `Vec` moves every entry after the first removed one. The program
//! list's records are 128 bytes, and in a run with a backlog the programs that finish are the
//! oldest, near the front: under `fcfs` on the 10 000-job Lublin trace, the list holds 1 909
//! programs on average and a `Vec` moves 1 902 of them at each removal (`memmove` is then 62 %
//! of the run's instructions). A [`List`] keeps its entries at the back of its buffer and closes the gaps
//! from whichever side moves fewer entries: the front moves up, over the gaps, when that is
//! shorter (6 entries a removal for that run), and the buffer is rebased to its start, in one
//! move, when it fills while its spent front is at least as long as the list.

use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// An ordered list that removes entries by moving the shorter side (see the module docs). It
/// dereferences to the slice of its entries.
pub(crate) struct List<T> {
    /// `buf[head..]` holds the entries; `buf[..head]` is spent (uninitialised).
    buf: Vec<MaybeUninit<T>>,
    head: usize,
    /// The first entry and the number of entries, kept beside the buffer so that reading the
    /// list costs what reading a `Vec` does (every index into the program list goes through
    /// them); set by [`List::sync`] after every change.
    start: NonNull<T>,
    len: usize,
}

// SAFETY: a `List` owns its entries as a `Vec` does; `start` points into its own buffer.
unsafe impl<T: Send> Send for List<T> {}
// SAFETY: as above; shared access only reads.
unsafe impl<T: Sync> Sync for List<T> {}

impl<T> Default for List<T> {
    fn default() -> Self {
        List { buf: Vec::new(), head: 0, start: NonNull::dangling(), len: 0 }
    }
}

impl<T> List<T> {
    /// Points `start` and `len` at `buf[head..]` again.
    fn sync(&mut self) {
        // SAFETY: `head <= buf.len()`, so the pointer is within the buffer or one past its end.
        self.start = unsafe { NonNull::new_unchecked(self.buf.as_mut_ptr().add(self.head).cast::<T>()) };
        self.len = self.buf.len() - self.head;
    }

    /// Appends `item` at the end.
    pub(crate) fn push(&mut self, item: T) {
        if self.buf.len() == self.buf.capacity() && self.head > 0 && self.head >= self.len() {
            let live = self.len();
            // SAFETY: `buf[head..]` is initialised, `head + live == buf.len()`; the entries move
            // to `buf[..live]` (overlap-safe copy), after which only those are initialised, and
            // `set_len` on a `MaybeUninit` buffer drops nothing.
            unsafe {
                let base = self.buf.as_mut_ptr();
                std::ptr::copy(base.add(self.head), base, live);
                self.buf.set_len(live);
            }
            self.head = 0;
            // Before the push, which may panic (and `Drop` reads `start`).
            self.sync();
        }
        self.buf.push(MaybeUninit::new(item));
        self.sync();
    }

    /// Where the first entry is in the buffer: an entry's place in the buffer is its index plus
    /// this, and stays put while removals move other entries (those that do move are reported
    /// by [`List::remove_tracking`]'s callback). The tests follow entries with it.
    #[cfg(test)]
    fn offset(&self) -> usize {
        self.head
    }

    /// Removes the entries `plan` names (made for a list of this length), keeping the others'
    /// order (see [`List::remove_tracking`]).
    pub(crate) fn remove(&mut self, plan: &Removal) {
        self.remove_tracking(plan, |_, _, _| {});
    }

    /// Removes the entries `plan` names (made for a list of this length), keeping the others'
    /// order: entries before the plan's split move up over the removed ones before them, entries
    /// after it move down ([`Removal`]). `moved(from, to, len)` is called with the old and new
    /// buffer places of every stretch of entries that moved: `from..from + len` went to
    /// `to..to + len` (the tests follow entries with it; [`List::remove`] passes a callback that
    /// does nothing).
    pub(crate) fn remove_tracking(&mut self, plan: &Removal, mut moved: impl FnMut(usize, usize, usize)) {
        let len = self.len();
        assert_eq!(plan.len, len, "a removal planned for a list of another length");
        let Removal { gone, front, .. } = *plan;
        if gone.is_empty() {
            return;
        }
        let k = gone.len();
        let head = self.head;
        let end = self.buf.len();
        // SAFETY: every index in `gone` is below the length and appears once (checked by
        // `Removal::new`, for this length), so each removed entry is dropped once and each
        // survivor moved at most once, by an overlap-safe copy, into a place that no survivor
        // still to move occupies (stretches move in the order that vacates their targets first).
        // Meanwhile the list is empty as far as its buffer and `Drop` know (length `head`, no
        // entries), so a panicking destructor leaks the entries instead of dropping a moved or
        // dropped one again.
        unsafe {
            self.buf.set_len(head);
            self.len = 0;
            let base = self.buf.as_mut_ptr();
            for &g in gone {
                std::ptr::drop_in_place(base.add(head + g).cast::<T>());
            }
            // The front moves up: the stretch before gap `r` by `front - r` places, highest
            // first.
            for r in (0..front).rev() {
                let start = if r == 0 { 0 } else { gone[r - 1] + 1 };
                let n = gone[r] - start;
                let (from, to) = (head + start, head + start + front - r);
                if n > 0 {
                    std::ptr::copy(base.add(from), base.add(to), n);
                    moved(from, to, n);
                }
            }
            // The back moves down: the stretch after gap `r` by `r + 1 - front` places, lowest
            // first.
            for r in front..k {
                let next = gone.get(r + 1).copied().unwrap_or(len);
                let n = next - gone[r] - 1;
                let (from, to) = (head + gone[r] + 1, head + gone[r] + 1 - (r + 1 - front));
                if n > 0 {
                    std::ptr::copy(base.add(from), base.add(to), n);
                    moved(from, to, n);
                }
            }
            self.head = head + front;
            self.buf.set_len(end - (k - front));
        }
        self.sync();
    }
}

/// Which entries a removal takes out of a list of a given length, and how it closes the gaps,
/// worked out once for every list of that length it applies to (the engine's program list and
/// the order of its records' slots remove the same entries). Entries before the widest gap
/// between removals (counting the list's two ends) move up over the removed ones before them;
/// entries after it move down; so the entries that move are those outside that gap, the fewest
/// of any split.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Removal<'g> {
    /// The indices removed, strictly increasing, all below `len`.
    gone: &'g [usize],
    /// The length of the lists it applies to.
    len: usize,
    /// The split: gaps `gone[..front]` are closed by moving the front up, the rest by moving the
    /// back down.
    front: usize,
}

impl<'g> Removal<'g> {
    /// The removal of the entries at the indices `gone` (strictly increasing, all below `len`)
    /// from a list of `len` entries.
    pub(crate) fn new(len: usize, gone: &'g [usize]) -> Self {
        assert!(
            gone.windows(2).all(|w| w[0] < w[1]) && gone.last().is_none_or(|&g| g < len),
            "indices not increasing or out of range"
        );
        let k = gone.len();
        // Moving the front for the first `j` costs the survivors before `gone[j - 1]`; moving
        // the back for the others, those after `gone[j]`.
        let cost = |j: usize| {
            let front = if j > 0 { gone[j - 1] - (j - 1) } else { 0 };
            let back = if j < k { len - gone[j] - (k - j) } else { 0 };
            front + back
        };
        // The first of the cheapest: on a tie the back moves, which leaves no spent front.
        let front = (0..=k).min_by_key(|&j| cost(j)).expect("k + 1 candidates");
        Removal { gone, len, front }
    }

    /// The indices removed.
    pub(crate) fn gone(&self) -> &'g [usize] {
        self.gone
    }
}

impl<T> Deref for List<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: `start` and `len` describe `buf[head..]` (synced after every change), which
        // is initialised, and `MaybeUninit<T>` has `T`'s layout.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for List<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as for `deref`, uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.len) }
    }
}

impl<T> Drop for List<T> {
    fn drop(&mut self) {
        let head = self.head;
        // SAFETY: `buf[head..]` is initialised and dropped once; the buffer then forgets it.
        unsafe {
            let live: *mut [T] = &mut **self;
            self.buf.set_len(head);
            std::ptr::drop_in_place(live);
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for List<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use proptest::prelude::*;

    use super::{List, Removal};

    /// A list of `items`, after `spent` more entries before them were removed (so that its
    /// buffer has a spent front when there are items).
    fn list(items: &[Rc<u32>], spent: usize) -> List<Rc<u32>> {
        let mut l = List::default();
        for _ in 0..spent {
            l.push(Rc::new(u32::MAX));
        }
        for r in items {
            l.push(r.clone());
        }
        l.remove(&Removal::new(spent + items.len(), &(0..spent).collect::<Vec<_>>()));
        l
    }

    proptest! {
        #[test]
        fn removals_keep_the_rest_in_order_and_drop_each_once(
            n in 0usize..40, spent in 0usize..20, picks in proptest::collection::vec(any::<bool>(), 40),
        ) {
            let items: Vec<Rc<u32>> = (0..n as u32).map(Rc::new).collect();
            let gone: Vec<usize> = (0..n).filter(|&i| picks[i]).collect();
            let mut l = list(&items, spent);
            // The places the callback reports: every entry that moved, and where to.
            let mut place: Vec<usize> = (0..n).map(|i| l.offset() + i).collect();
            let before: Vec<usize> = place.clone();
            l.remove_tracking(&Removal::new(n, &gone), |from, to, len| {
                for p in place.iter_mut() {
                    if (from..from + len).contains(p) {
                        *p = *p - from + to;
                    }
                }
            });
            let want: Vec<u32> = (0..n as u32).filter(|x| !gone.contains(&(*x as usize))).collect();
            prop_assert_eq!(l.iter().map(|r| **r).collect::<Vec<_>>(), want.clone());
            for (i, r) in items.iter().enumerate() {
                prop_assert_eq!(Rc::strong_count(r), if gone.contains(&i) { 1 } else { 2 });
            }
            // Each survivor's reported place is where it is now.
            let survivors: Vec<usize> = (0..n).filter(|i| !gone.contains(i)).collect();
            for (k, &i) in survivors.iter().enumerate() {
                prop_assert_eq!(place[i], l.offset() + k, "entry {} (was at {})", i, before[i]);
            }
            drop(l);
            prop_assert!(items.iter().all(|r| Rc::strong_count(r) == 1), "dropping the list drops its entries");
        }
    }

    #[test]
    fn the_shorter_side_moves() {
        let items: Vec<Rc<u32>> = (0..100).map(Rc::new).collect();
        let mut l = list(&items, 0);
        let mut moves = 0;
        l.remove_tracking(&Removal::new(100, &[2]), |_, _, n| moves += n);
        assert_eq!((moves, l.offset()), (2, 1), "the two before it moved up");
        moves = 0;
        l.remove_tracking(&Removal::new(99, &[95]), |_, _, n| moves += n);
        assert_eq!((moves, l.offset()), (3, 1), "the three after it moved down");
        assert_eq!(l.len(), 98);
    }

    #[test]
    fn a_full_buffer_with_a_long_spent_front_is_rebased() {
        let mut l = List::default();
        let mut rebased = false;
        for x in 0..1000u32 {
            let before = l.offset();
            l.push(x);
            rebased |= l.offset() < before;
            if l.len() > 3 {
                l.remove(&Removal::new(l.len(), &[0]));
            }
        }
        assert_eq!(l.iter().copied().collect::<Vec<_>>(), vec![997, 998, 999]);
        assert!(l.buf.capacity() <= 8, "the buffer stays small: {}", l.buf.capacity());
        assert!(rebased && l.offset() < l.buf.len());
    }

    #[test]
    fn a_panicking_destructor_leaks_instead_of_dropping_twice() {
        use std::cell::Cell;
        thread_local! { static DROPS: Cell<u32> = const { Cell::new(0) }; }
        struct Bomb(bool);
        impl Drop for Bomb {
            fn drop(&mut self) {
                DROPS.with(|d| d.set(d.get() + 1));
                assert!(!self.0, "a destructor that panics");
            }
        }
        let mut l = List::default();
        for i in 0..6 {
            l.push(Bomb(i == 2));
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| l.remove(&Removal::new(6, &[2, 4]))));
        assert!(r.is_err());
        drop(l);
        assert_eq!(DROPS.with(Cell::get), 1, "only the panicking entry was dropped; the rest leaked");
    }

    #[test]
    #[should_panic(expected = "not increasing")]
    fn removing_unsorted_indices_is_refused() {
        Removal::new(3, &[1, 0]);
    }
}
