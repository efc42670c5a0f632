use super::*;

fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn a_flag_beats_the_environment_and_same_rank_sources_clash() {
    let mut flags = ClusterFlags::default();
    let mut warnings = Vec::new();
    let both = env(&[(SERVERS_ENV, "h:1"), (GROUPS_ENV, "a=h:2")]);
    // Two in the environment, nothing on the command line: an error.
    let clash = servers(&flags, &both, None, false, &mut warnings).unwrap_err();
    assert!(
        matches!(clash, Failure::Usage(m) if m.contains(SERVERS_ENV) && m.contains(GROUPS_ENV))
    );
    // A flag: the environment is ignored, with a warning each.
    flags.servers = Some("h:3".into());
    let chosen = servers(&flags, &both, None, false, &mut warnings)
        .unwrap()
        .unwrap();
    assert_eq!(chosen.servers, Servers::List("h:3".into()));
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains(SERVERS_ENV) && warnings[0].contains("--servers"));
}

#[test]
fn a_config_flag_ranks_as_a_flag_for_the_servers() {
    let flags = ClusterFlags {
        config: Some("cluster.toml".into()),
        ..ClusterFlags::default()
    };
    let mut warnings = Vec::new();
    let vars = env(&[(SERVERS_ENV, "h:1")]);
    let file = config_file(&flags, &vars, &mut warnings);
    let chosen = servers(&flags, &vars, file.as_ref(), true, &mut warnings)
        .unwrap()
        .unwrap();
    assert_eq!(chosen.servers, Servers::File);
    assert_eq!(
        warnings,
        ["MEMCACHED_SERVERS is ignored: --config cluster.toml gives the servers"]
    );
    // A file without groups names no servers: the environment's stand.
    let mut warnings = Vec::new();
    let chosen = servers(&flags, &vars, file.as_ref(), false, &mut warnings)
        .unwrap()
        .unwrap();
    assert_eq!(chosen.name, SERVERS_ENV);
    assert!(warnings.is_empty());
    // --config with --servers: two at the flag rank.
    let both = ClusterFlags {
        servers: Some("h:2".into()),
        ..flags
    };
    assert!(servers(&both, &vars, file.as_ref(), true, &mut Vec::new()).is_err());
}

#[test]
fn a_url_names_its_own_parameters() {
    assert_eq!(
        url_params("memcache://h:1,h:2?hash=native&zone=a&tls=true"),
        ["hash", "zone", "tls"]
    );
    assert!(url_params("memcache://h:1").is_empty());
}
