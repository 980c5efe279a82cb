//! The policy and selector registries, row by row: every row parses, reports and validates its parameters as its
//! catalogue says, declares its event loop (a `generic` row names its reason), and replays.
use kvsim_core::params::{Domain, ParamSpec, Search};
use kvsim_core::policy::Loop;
use kvsim_core::{
    replay, Cluster, ClusterConfig, PolicyConfig, ReplayConfig, SelectorConfig, Workload, POLICIES,
    POLICY_NAMES, REPLICA_NAMES, SELECTORS,
};

const MS: u64 = 1_000_000;

fn check_specs(owner: &str, specs: &[ParamSpec], params: &[(&'static str, f64)]) {
    let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
    let reported: Vec<&str> = params.iter().map(|p| p.0).collect();
    assert_eq!(
        names, reported,
        "{owner}: catalogue and report list the same parameters in one order"
    );
    for (s, &(_, v)) in specs.iter().zip(params) {
        assert_eq!(s.default, v, "{owner}: {} default", s.name);
        assert_eq!(
            s.check(s.default).unwrap(),
            s.default,
            "{owner}: {} default is valid",
            s.name
        );
        assert!(
            !s.doc.trim().is_empty(),
            "{owner}: {} has a doc comment",
            s.name
        );
        assert!(!s.valid.is_empty());
        match s.search {
            Search::Fixed => {}
            Search::Range {
                lo,
                hi,
                step,
                log,
                integer,
            } => {
                assert!(
                    s.lo <= lo && lo <= hi && hi <= s.hi,
                    "{owner}: {} search range inside valid range",
                    s.name
                );
                assert!(step >= 0.0 && (!log || lo > 0.0), "{owner}: {}", s.name);
                assert!(
                    !integer
                        || s.domain != Domain::Real
                        || (lo.fract() == 0.0 && hi.fract() == 0.0)
                );
            }
            Search::Choices(c) => {
                assert!(!c.is_empty());
                for &x in c {
                    assert!(
                        s.check(x).is_ok(),
                        "{owner}: {} choice {x} is valid",
                        s.name
                    );
                }
            }
        }
    }
}

/// Two requests on a 3-server RF-2 cluster.
fn tiny() -> (Cluster, Workload) {
    let c = Cluster::new(ClusterConfig {
        servers: 3,
        slots: 1,
        replication: 2,
        vnodes: 1,
        service_rate: 1000.0,
        net_latency_ns: 0,
        clients: 1,
    })
    .unwrap();
    let wl = Workload::from_parts(
        &[
            (0, vec![(0, vec![MS]), (1, vec![MS, MS])]),
            (0, vec![(2, vec![MS]), (0, vec![MS])]),
        ],
        1,
    );
    (c, wl)
}

#[test]
fn every_policy_row_is_complete() {
    assert_eq!(POLICIES.len(), POLICY_NAMES.len());
    let (c, wl) = tiny();
    for (e, &name) in POLICIES.iter().zip(POLICY_NAMES) {
        assert_eq!(e.name, name);
        let cfg = PolicyConfig::from_name(name).unwrap();
        assert_eq!(cfg.name(), name);
        assert_eq!(cfg.entry().name, name);
        assert_eq!(e.owner, format!("policy '{name}'"));
        check_specs(e.owner, e.params, &cfg.params());
        cfg.validate().unwrap();
        if let Loop::Generic(why) = e.event_loop {
            assert!(!why.is_empty(), "{name}: a generic row says why");
        }
        // Unknown parameters name the valid ones.
        let err = PolicyConfig::build(name, &[("no_such".into(), 1.0)])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!(
                "unknown parameter 'no_such' for policy '{name}': valid "
            )),
            "{err}"
        );
        for s in e.params {
            assert!(err.contains(&format!("{} ({})", s.name, s.valid)), "{err}");
        }
        for sel in ["round-robin", "ds"] {
            let rc = ReplayConfig {
                selector: SelectorConfig::from_name(sel).unwrap(),
                warmup: 0.0,
                ..ReplayConfig::new(cfg.clone())
            };
            let r = replay(&c, &wl, &rc).unwrap();
            assert_eq!((r.policy, r.selector, r.latency_ns.len()), (name, sel, 2));
        }
    }
}

#[test]
fn every_selector_row_is_complete() {
    assert_eq!(SELECTORS.len(), REPLICA_NAMES.len());
    let (c, wl) = tiny();
    for (e, &name) in SELECTORS.iter().zip(REPLICA_NAMES) {
        assert_eq!(e.name, name);
        let cfg = SelectorConfig::from_name(name).unwrap();
        assert_eq!((cfg.name(), cfg.entry().name), (name, name));
        assert_eq!(e.owner, format!("replica selector '{name}'"));
        check_specs(e.owner, e.params, &cfg.params());
        if let Loop::Generic(why) = e.event_loop {
            assert!(!why.is_empty());
        }
        let err = SelectorConfig::build(name, &[("no_such".into(), 1.0)])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!(
                "unknown parameter 'no_such' for replica selector '{name}'"
            )),
            "{err}"
        );
        let rc = ReplayConfig {
            selector: cfg,
            warmup: 0.0,
            ..ReplayConfig::default()
        };
        assert_eq!(replay(&c, &wl, &rc).unwrap().selector, name);
    }
}

#[test]
fn unknown_parameter_message_lists_the_valid_ones() {
    let e = PolicyConfig::build("rein", &[("K".into(), 4.0)])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "unknown parameter 'K' for policy 'rein': valid k (integer in 1..=64), range_factor ([1, 1e6]), \
         r_q1 ([0.001, 1e6]), rate_step ([0, 1e6]), tau_1 ([1e-9, 1e9])"
    );
    let e = PolicyConfig::build("fifo", &[("k".into(), 4.0)])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "unknown parameter 'k' for policy 'fifo': valid none (it has no parameters)"
    );
    let e = PolicyConfig::from_name("no-such-policy")
        .unwrap_err()
        .to_string();
    assert!(e.contains("'policy'") && e.contains("rein-sbf"), "{e}");
}
