//! Operating a running server: what it counts ([`stats`]) and shows on the control address
//! ([`control`]: JSON, and Prometheus text from [`prometheus`]), whether it is ready
//! ([`readiness`]) as told to load balancers ([`agent_check`], HAProxy's) and to systemd
//! ([`systemd`]), and the access log.

pub mod access_log;
pub mod agent_check;
pub mod control;
pub mod prometheus;
pub mod readiness;
pub mod stats;
pub mod systemd;
