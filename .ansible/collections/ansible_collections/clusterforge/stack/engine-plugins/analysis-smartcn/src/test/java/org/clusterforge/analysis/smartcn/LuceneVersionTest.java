package org.clusterforge.analysis.smartcn;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.apache.lucene.analysis.cn.smart.SmartChineseAnalyzer;
import org.apache.lucene.util.Version;
import org.junit.jupiter.api.Test;

/**
 * Guards the one thing the build cannot derive by itself: lucene.version must be the Lucene
 * the engine ships. lucene-core on this classpath comes only from the engine (the smartcn
 * dependency's own Lucene jars are excluded), so it tells which Lucene that is.
 */
class LuceneVersionTest {

    @Test
    void bundledSmartcnJarMatchesTheEnginesLucene() {
        String enginesLucene = Version.LATEST.toString();
        String requested = System.getProperty("lucene.version");
        String bundled = SmartChineseAnalyzer.class.getPackage().getSpecificationVersion();
        String fix = "the engine " + System.getProperty("opensearch.version") + " ships Lucene " + enginesLucene
                + ": build with -Dlucene.version=" + enginesLucene;
        assertEquals(enginesLucene, requested, fix);
        assertEquals(enginesLucene, bundled, fix);
    }
}
