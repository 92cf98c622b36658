//! PostgreSQL's password file, as libpq reads it: a URL without a password takes it from the
//! file `PGPASSFILE` names, else `~/.pgpass`, so the password need not be in the URL (where
//! `--state` would show it to every local user in the process list).
//!
//! Each line is `hostname:port:database:username:password`, `*` matching anything in the
//! first four fields, `\:` and `\\` escaping; blank lines and lines starting with `#` say
//! nothing. The first line that matches gives the password. A Unix socket's host is
//! `localhost`. As libpq does, a file others can read is not trusted: here it is refused,
//! naming the file and the fix, rather than passed over in silence.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tokio_postgres::Config;
use tokio_postgres::config::Host;

/// The password file's path: `PGPASSFILE`, else `$HOME/.pgpass`.
fn location(vars: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    vars("PGPASSFILE")
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
        .or_else(|| vars("HOME").map(|home| Path::new(&home).join(".pgpass")))
}

/// The password for `config`'s first host, port, database and user from the password file
/// `vars` lead to; `Ok(None)` when there is no file or no line matches.
///
/// # Errors
///
/// The file is readable by its group or others (the reason names it and says `chmod 600`),
/// or cannot be read.
pub(super) fn password(
    config: &Config,
    vars: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    let Some(path) = location(vars) else {
        return Ok(None);
    };
    let Ok(meta) = std::fs::metadata(&path) else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Ok(None);
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "the password file {} can be read by others than its owner: chmod 600 it, as \
             PostgreSQL asks",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(&path).map_err(|error| {
        format!(
            "the password file {} cannot be read: {error}",
            path.display()
        )
    })?;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(_)) | None => "localhost".to_owned(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default();
    let database = config.get_dbname().unwrap_or(user);
    let wanted = [host.as_str(), port.as_str(), database, user];
    Ok(text
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .filter_map(fields)
        .find(|fields| {
            fields[..4]
                .iter()
                .zip(wanted)
                .all(|(field, wanted)| field == "*" || field == wanted)
        })
        .map(|mut fields| fields.swap_remove(4)))
}

/// A line's five fields, unescaped; `None` for a line of another shape.
fn fields(line: &str) -> Option<Vec<String>> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut()?.push(chars.next().unwrap_or('\\')),
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut()?.push(c),
        }
    }
    (fields.len() == 5).then_some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_line_gives_the_password_and_a_file_others_read_is_refused() {
        let dir = std::env::temp_dir().join(format!("pgpass-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder");
        let file = dir.join("pgpass");
        std::fs::write(
            &file,
            "# comment\n\
             other.example:5432:mcp:app:wrong\n\
             db.example:6543:mcp:app:pa\\:ss\\\\word\n\
             *:*:*:app:fallback\n",
        )
        .expect("written");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("0600");
        let shown = file.display().to_string();
        let vars = |name: &str| (name == "PGPASSFILE").then(|| shown.clone());
        let config = |url: &str| url.parse::<Config>().expect("a URL");
        assert_eq!(
            password(&config("postgres://app@db.example:6543/mcp"), &vars),
            Ok(Some("pa:ss\\word".to_owned()))
        );
        assert_eq!(
            password(&config("postgres://app@elsewhere/mcp"), &vars),
            Ok(Some("fallback".to_owned()))
        );
        assert_eq!(
            password(&config("postgres://nobody@db.example/mcp"), &vars),
            Ok(None)
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("0644");
        let refused = password(&config("postgres://app@db.example:6543/mcp"), &vars)
            .expect_err("readable by others");
        assert!(refused.contains("chmod 600"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
