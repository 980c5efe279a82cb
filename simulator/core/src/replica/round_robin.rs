//! `round-robin`: every client rotates over each group's replicas, one step per opset (Rein §5.3's setting).
use super::ReplicaSelector;

crate::params! {
    /// `round-robin` has no parameters.
    pub struct RoundRobinConfig for "replica selector 'round-robin'" {}
}

/// Every client rotates over each group's replicas, one step per opset; client c starts at replica c mod RF.
#[derive(Debug, Clone)]
pub struct RoundRobin {
    next: Vec<u8>,
    groups: usize,
}

impl RoundRobin {
    pub fn new(clients: usize, groups: usize, rf: usize) -> Self {
        let mut next = vec![0u8; clients * groups];
        for c in 0..clients {
            next[c * groups..(c + 1) * groups].fill((c % rf) as u8);
        }
        RoundRobin { next, groups }
    }
}

impl ReplicaSelector for RoundRobin {
    #[inline]
    fn select(&mut self, client: u32, group: u32, replicas: &[u32], _outstanding: &[u32]) -> u32 {
        let i = client as usize * self.groups + group as usize;
        let k = self.next[i] as usize;
        self.next[i] = ((k + 1) % replicas.len()) as u8;
        replicas[k]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_rotates_per_client_and_group() {
        let mut rr = RoundRobin::new(2, 2, 3);
        let reps = [7, 8, 9];
        let c0: Vec<u32> = (0..4).map(|_| rr.select(0, 0, &reps, &[])).collect();
        assert_eq!(c0, vec![7, 8, 9, 7]);
        let c1: Vec<u32> = (0..2).map(|_| rr.select(1, 0, &reps, &[])).collect();
        assert_eq!(c1, vec![8, 9]);
        assert_eq!(rr.select(0, 1, &reps, &[]), 7);
    }
}
