//! Tunables of the games and icebreaker families (documented in docs/games.md).

use std::time::Duration;

/// Timing and retention values. [`GamesConfig::default`] is what the server uses;
/// tests start the family with shorter values through `companiond_games::start_with`.
#[derive(Clone, Debug)]
pub struct GamesConfig {
    /// Returned as `heartbeat_interval_seconds` (how often the game page should beat).
    pub heartbeat_interval: Duration,
    /// A visible page's route ends (`heartbeat_timeout`) after this long without a beat.
    pub heartbeat_timeout: Duration,
    /// The same for a hidden page (`visibilityState` hidden / `pageVisible` false).
    pub hidden_heartbeat_timeout: Duration,
    /// How often the background sweep looks for lapsed routes.
    pub sweep_period: Duration,
    /// Ended route records (for `/route/state`, idempotent `/end`) are purged after this.
    pub ended_route_ttl: Duration,
    /// Game dialogue model sessions idle longer than this are dropped.
    pub llm_session_idle: Duration,
    /// Game chat rate limit: at most `chat_rate_limit` calls per window per (character, session).
    pub chat_rate_limit: usize,
    pub chat_rate_window: Duration,
    /// A badminton score session may be submitted to the leaderboard within this time.
    pub score_session_ttl: Duration,
    /// Game diagnostic logs: retained sessions (oldest dropped first).
    pub log_session_limit: usize,
    /// Game diagnostic logs: entries per session (oldest dropped first).
    pub log_entry_limit: usize,
    /// Model timeouts.
    pub chat_timeout: Duration,
    pub quick_lines_timeout: Duration,
    pub passive_guard_timeout: Duration,
    pub free_text_timeout: Duration,
}

impl Default for GamesConfig {
    fn default() -> Self {
        GamesConfig {
            heartbeat_interval: Duration::from_millis(2500),
            heartbeat_timeout: Duration::from_secs(10),
            hidden_heartbeat_timeout: Duration::from_secs(60),
            sweep_period: Duration::from_secs(1),
            ended_route_ttl: Duration::from_secs(30 * 60),
            llm_session_idle: Duration::from_secs(30 * 60),
            chat_rate_limit: 10,
            chat_rate_window: Duration::from_secs(8),
            score_session_ttl: Duration::from_secs(600),
            log_session_limit: 8,
            log_entry_limit: 1000,
            chat_timeout: Duration::from_secs(15),
            quick_lines_timeout: Duration::from_secs(20),
            passive_guard_timeout: Duration::from_millis(6500),
            free_text_timeout: Duration::from_secs(20),
        }
    }
}
