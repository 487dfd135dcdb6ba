//! The CSV form of `cpumgr sim`'s tables (RFC 4180): a header line of the columns' names, then a
//! line per row, for both the machine's and the cluster's table.

use std::borrow::Cow;

use super::emit;

/// Prints `columns` and then each of `rows` as CSV lines.
pub(super) fn print(columns: &[impl AsRef<str>], rows: &[Vec<String>]) -> anyhow::Result<()> {
    outln!("{}", line(columns));
    for r in rows {
        outln!("{}", line(r));
    }
    Ok(())
}

/// `cells` as one CSV line.
fn line(cells: &[impl AsRef<str>]) -> String {
    cells.iter().map(|c| field(c.as_ref())).collect::<Vec<_>>().join(",")
}

/// `cell` as a CSV field: quoted, with its quotes doubled, when it holds a comma, a quote or a
/// line break (a policy spec with parameters, `cs:mpl=4,fill=false`).
fn field(cell: &str) -> Cow<'_, str> {
    if cell.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", cell.replace('"', "\"\"")).into()
    } else {
        cell.into()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fields_with_commas_quotes_or_breaks_are_quoted() {
        let cells = ["os", "cs:mpl=4,fill=false", "say \"hi\"", "two\nlines", "9.67"];
        assert_eq!(super::line(&cells), "os,\"cs:mpl=4,fill=false\",\"say \"\"hi\"\"\",\"two\nlines\",9.67");
    }
}
