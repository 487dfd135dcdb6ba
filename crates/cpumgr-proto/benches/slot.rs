//! Cost of what a program does on its hot path: reading its allocation from its slot (the count
//! alone, one load; and the whole allocation through the seqlock into a reused buffer, on
//! machines of 64, 128 and 1024 CPUs, or as a new value), and the manager's publication.

use std::hint::black_box;

use cpumgr_core::CpuSet;
use cpumgr_proto::slot::Allocation;
use cpumgr_proto::Segment;
use criterion::{criterion_group, criterion_main, Criterion};

fn slot(c: &mut Criterion) {
    let seg = Segment::create(1).unwrap();
    let cpus = CpuSet::parse("0-7,64-71").unwrap();
    seg.slot().publish(1, 16, true, &cpus);
    c.bench_function("allocated_count", |b| b.iter(|| black_box(seg.slot()).allocated_count()));
    for (name, set) in [("64 CPUs", "0-31"), ("128 CPUs", "0-7,64-71"), ("1024 CPUs", "0-7,1016-1023")] {
        let s = Segment::create(1).unwrap();
        let set = CpuSet::parse(set).unwrap();
        s.slot().publish(1, set.len() as u32, true, &set);
        let mut out = Allocation::default();
        c.bench_function(&format!("read_allocation ({name})"), |b| {
            b.iter(|| {
                let ok = black_box(s.slot()).read_allocation(&mut out);
                black_box(&out);
                ok
            })
        });
        c.bench_function(&format!("allocation, then a CPU test ({name})"), |b| {
            b.iter(|| black_box(s.slot()).allocation().map(|a| a.cpus.contains(black_box(3))))
        });
    }
    c.bench_function("publish", |b| {
        let mut epoch = 1;
        b.iter(|| {
            epoch += 1;
            seg.slot().publish(epoch, 16, true, black_box(&cpus))
        })
    });
}

criterion_group!(benches, slot);
criterion_main!(benches);
