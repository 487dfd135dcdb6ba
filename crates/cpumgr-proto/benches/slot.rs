//! Cost of what a program does on its hot path: reading its allocation from its slot (the count
//! alone, one load; and the whole allocation through the seqlock), and the manager's publication.

use std::hint::black_box;

use cpumgr_core::CpuSet;
use cpumgr_proto::Segment;
use criterion::{criterion_group, criterion_main, Criterion};

fn slot(c: &mut Criterion) {
    let seg = Segment::create(1).unwrap();
    let cpus = CpuSet::parse("0-7,64-71").unwrap();
    seg.slot().publish(1, 16, true, &cpus);
    c.bench_function("allocated_count", |b| b.iter(|| black_box(seg.slot()).allocated_count()));
    c.bench_function("allocation (seqlock)", |b| b.iter(|| black_box(seg.slot()).allocation()));
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
