//! hwloc XML topologies, as `lstopo --of xml` writes them (format v2, and v1's shapes): nested
//! `<object type="...">` elements. Packages, NUMA nodes, L3 caches, cores and PUs are read; every
//! other object (Machine, Group, Die, L1/L2 caches, I/O devices) is walked through.
//!
//! In v2 a NUMA node is a *memory child*: a leaf `NUMANode` object beside the CPU children of the
//! package or group it belongs to, and it covers that parent's whole subtree. In v1 it is an
//! ordinary parent. Both are understood. Caches are `L3Cache` in v2 and `Cache` with `depth="3"`
//! in v1.

use roxmltree::{Document, Node};

use crate::topology::{CpuInfo, Topology};

/// Why an XML topology was refused: the source's name, the line, and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {message}")]
pub struct XmlError {
    /// The file (or label) the XML came from.
    pub source_name: String,
    /// 1-based line.
    pub line: u32,
    /// What is wrong, naming the element and attribute.
    pub message: String,
}

#[derive(Clone, Copy, Default)]
struct Context {
    package: Option<u32>,
    numa: Option<u32>,
    l3: Option<u32>,
    core: Option<u32>,
}

struct Walker<'a> {
    doc: &'a Document<'a>,
    source_name: &'a str,
    infos: Vec<CpuInfo>,
    caches: u32,
    cores: u32,
}

impl Walker<'_> {
    fn error(&self, node: Node, message: String) -> XmlError {
        XmlError { source_name: self.source_name.into(), line: self.doc.text_pos_at(node.range().start).row, message }
    }

    fn os_index(&self, node: Node) -> Result<Option<u32>, XmlError> {
        match node.attribute("os_index") {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| {
                let kind = node.attribute("type").unwrap_or("?");
                self.error(node, format!("object {kind}: attribute os_index: {v:?} is not a number"))
            }),
        }
    }

    fn objects<'n>(node: Node<'n, 'n>) -> impl Iterator<Item = Node<'n, 'n>> {
        node.children().filter(|c| c.is_element() && c.tag_name().name() == "object")
    }

    fn walk(&mut self, node: Node, mut ctx: Context) -> Result<(), XmlError> {
        let kind = node.attribute("type").ok_or_else(|| self.error(node, "object without a type attribute".into()))?;
        let has_object_children = Self::objects(node).next().is_some();
        match kind {
            "Package" | "Socket" => ctx.package = Some(self.os_index(node)?.unwrap_or(0)),
            "NUMANode" if has_object_children => ctx.numa = Some(self.os_index(node)?.unwrap_or(0)),
            "L3Cache" => ctx.l3 = Some(self.next_cache()),
            "Cache" if node.attribute("depth") == Some("3") => ctx.l3 = Some(self.next_cache()),
            "Core" => {
                ctx.core = Some(match self.os_index(node)? {
                    Some(i) => i,
                    None => self.cores,
                });
                self.cores += 1;
            }
            "PU" => {
                let cpu = self
                    .os_index(node)?
                    .ok_or_else(|| self.error(node, "object PU: attribute os_index is missing".into()))?;
                self.infos.push(CpuInfo { cpu, package: ctx.package, numa: ctx.numa, l3: ctx.l3, core: ctx.core });
                return Ok(());
            }
            _ => {}
        }
        // v2: a NUMA node is a leaf memory child covering its parent's subtree.
        for child in Self::objects(node) {
            if child.attribute("type") == Some("NUMANode") && Self::objects(child).next().is_none() {
                ctx.numa = Some(self.os_index(child)?.unwrap_or(0));
            }
        }
        for child in Self::objects(node) {
            if !(child.attribute("type") == Some("NUMANode") && Self::objects(child).next().is_none()) {
                self.walk(child, ctx)?;
            }
        }
        Ok(())
    }

    fn next_cache(&mut self) -> u32 {
        self.caches += 1;
        self.caches - 1
    }
}

/// The deepest element nesting accepted. Real hwloc files nest about ten deep; roxmltree recurses
/// once per level, so a hostile file thousands deep would overflow the stack and abort the
/// process (roxmltree issue #154; docs/FUZZING.md).
pub const MAX_DEPTH: usize = 256;

/// The byte offset where element nesting first exceeds [`MAX_DEPTH`], if it does. Counts every
/// `<name` as an opening and every `</` or `/>` as a closing, skipping `<!...>` and `<?...?>`:
/// an overestimate only for markup inside comments or CDATA, which hwloc never writes.
fn too_deep(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    for (at, _) in text.match_indices('<') {
        match bytes.get(at + 1) {
            Some(b'/') => depth = depth.saturating_sub(1),
            Some(b'!' | b'?') => {}
            _ => {
                let end = text[at..].find('>').map_or(text.len(), |e| at + e);
                if !text[..end].ends_with('/') {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Some(at);
                    }
                }
            }
        }
    }
    None
}

/// Parses an hwloc XML document. `source_name` names it in errors.
pub fn parse(source_name: &str, text: &str) -> Result<Topology, XmlError> {
    if let Some(at) = too_deep(text) {
        let line = text[..at].matches('\n').count() as u32 + 1;
        return Err(XmlError {
            source_name: source_name.into(),
            line,
            message: format!("elements nested more than {MAX_DEPTH} deep"),
        });
    }
    // hwloc writes a DOCTYPE line; allow it (roxmltree never fetches external entities).
    let options = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    let doc = Document::parse_with_options(text, options).map_err(|e| XmlError {
        source_name: source_name.into(),
        line: e.pos().row,
        message: format!("not well-formed XML: {e}"),
    })?;
    let root = doc.root_element();
    if root.tag_name().name() != "topology" {
        return Err(XmlError {
            source_name: source_name.into(),
            line: 1,
            message: format!("root element is <{}>, expected <topology>", root.tag_name().name()),
        });
    }
    let mut w = Walker { doc: &doc, source_name, infos: Vec::new(), caches: 0, cores: 0 };
    for obj in Walker::objects(root) {
        w.walk(obj, Context::default())?;
    }
    Topology::from_cpus(&w.infos).map_err(|e| XmlError {
        source_name: source_name.into(),
        line: 1,
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Level;

    /// Two packages, each with a NUMA node (v2 memory child), one L3, two cores of two PUs, and an
    /// L2 and a PCI device to walk through; PU numbering as Linux does (siblings +4).
    pub const V2: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x000000ff">
    <info name="DMIProductName" value="test"/>
    <object type="Package" os_index="0" cpuset="0x00000033">
      <object type="NUMANode" os_index="0" cpuset="0x00000033" local_memory="1000"/>
      <object type="L3Cache" cache_size="16777216" depth="3">
        <object type="L2Cache" depth="2">
          <object type="Core" os_index="0"><object type="PU" os_index="0"/><object type="PU" os_index="4"/></object>
        </object>
        <object type="L2Cache" depth="2">
          <object type="Core" os_index="1"><object type="PU" os_index="1"/><object type="PU" os_index="5"/></object>
        </object>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x000000cc">
      <object type="NUMANode" os_index="1" cpuset="0x000000cc" local_memory="1000"/>
      <object type="L3Cache" cache_size="16777216" depth="3">
        <object type="Core" os_index="0"><object type="PU" os_index="2"/><object type="PU" os_index="6"/></object>
        <object type="Core" os_index="1"><object type="PU" os_index="3"/><object type="PU" os_index="7"/></object>
      </object>
    </object>
    <object type="Bridge" os_index="0"><object type="PCIDev" os_index="1"/></object>
  </object>
</topology>
"#;

    #[test]
    fn reads_a_v2_file() {
        let t = parse("two.xml", V2).unwrap();
        assert_eq!(t.num_cpus(), 8);
        assert_eq!(t.count(Level::Package), 2);
        assert_eq!(t.count(Level::Numa), 2);
        assert_eq!(t.count(Level::L3), 2);
        assert_eq!(t.count(Level::Core), 4);
        let numa: Vec<String> = t.level(Level::Numa).map(|d| d.cpus.to_string()).collect();
        assert_eq!(numa, vec!["0-1,4-5", "2-3,6-7"]);
        let cores: Vec<String> = t.level(Level::Core).map(|d| d.cpus.to_string()).collect();
        assert_eq!(cores, vec!["0,4", "1,5", "2,6", "3,7"]);
    }

    #[test]
    fn reads_v1_shapes() {
        let v1 = r#"<topology><object type="Machine"><object type="NUMANode" os_index="0">
            <object type="Socket" os_index="0"><object type="Cache" depth="3">
            <object type="Core"><object type="PU" os_index="0"/></object>
            <object type="Core"><object type="PU" os_index="1"/></object>
            </object></object></object></object></topology>"#;
        let t = parse("v1.xml", v1).unwrap();
        assert_eq!(t.num_cpus(), 2);
        assert_eq!((t.count(Level::Numa), t.count(Level::L3), t.count(Level::Core)), (1, 1, 2));
    }

    #[test]
    fn errors_name_the_line_and_attribute() {
        let bad = V2.replace(r#"<object type="PU" os_index="6"/>"#, r#"<object type="PU" os_index="six"/>"#);
        let e = parse("two.xml", &bad).unwrap_err();
        assert_eq!(e.line, 20);
        assert!(e.message.contains("os_index") && e.message.contains("six"), "{e}");
        let e = parse("cut.xml", &V2[..400]).unwrap_err();
        assert!(e.message.contains("not well-formed"), "{e}");
        let e = parse("x.xml", "<svg/>").unwrap_err();
        assert!(e.message.contains("expected <topology>"), "{e}");
        let e = parse("x.xml", "<topology>\n<object type=\"PU\"/></topology>").unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn absurd_nesting_is_an_error_not_a_stack_overflow() {
        let n = 200_000;
        let deep = format!(
            "<topology>{}<object type=\"PU\" os_index=\"0\"/>{}</topology>",
            "<object type=\"Group\">\n".repeat(n),
            "</object>".repeat(n)
        );
        let e = parse("deep.xml", &deep).unwrap_err();
        assert!(e.message.contains("nested more than"), "{e}");
        assert_eq!(e.line, MAX_DEPTH as u32);
        let deepest_allowed = format!(
            "<topology>{}<object type=\"PU\" os_index=\"0\"/>{}</topology>",
            "<object type=\"Group\">\n".repeat(MAX_DEPTH - 1),
            "</object>".repeat(MAX_DEPTH - 1)
        );
        assert_eq!(parse("ok.xml", &deepest_allowed).unwrap().num_cpus(), 1);
        assert_eq!(too_deep(V2), None);
    }
}
