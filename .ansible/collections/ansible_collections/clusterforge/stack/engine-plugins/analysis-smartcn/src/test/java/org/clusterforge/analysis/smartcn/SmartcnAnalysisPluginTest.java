package org.clusterforge.analysis.smartcn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.cn.smart.SmartChineseAnalyzer;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.opensearch.Version;
import org.opensearch.cluster.metadata.IndexMetadata;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.index.IndexSettings;
import org.opensearch.index.analysis.IndexAnalyzers;
import org.opensearch.indices.analysis.AnalysisModule;

/**
 * Builds an index's analyzers through the engine's own analysis registry with this plugin
 * loaded, the way a node does, and runs text through them.
 */
class SmartcnAnalysisPluginTest {

    private static final String SENTENCE = "我们是中国人民的好朋友";
    private static final List<String> SENTENCE_WORDS = List.of("我们", "是", "中国", "人民", "的", "好", "朋友");

    @TempDir
    Path home;

    @Test
    void registersTheOfficialPluginsNames() {
        SmartcnAnalysisPlugin plugin = new SmartcnAnalysisPlugin();
        assertEquals(Set.of("smartcn"), plugin.getAnalyzers().keySet());
        assertEquals(Set.of("smartcn_tokenizer", "smartcn_sentence"), plugin.getTokenizers().keySet());
        assertEquals(Set.of("smartcn_stop", "smartcn_word"), plugin.getTokenFilters().keySet());
    }

    @Test
    void smartcnAnalyzerSegmentsTheSentenceIntoWords() throws IOException {
        try (IndexAnalyzers analyzers = buildAnalyzers(Settings.EMPTY)) {
            assertNotNull(analyzers.get("smartcn"), "analyzer smartcn is registered");
            assertInstanceOf(SmartChineseAnalyzer.class, analyzers.get("smartcn").analyzer());
            assertEquals(SENTENCE_WORDS, tokens(analyzers.get("smartcn"), SENTENCE));
        }
    }

    @Test
    void smartcnAnalyzerDropsPunctuationButKeepsWords() throws IOException {
        // Lucene's default smartcn stop set is punctuation only: no word is removed.
        try (IndexAnalyzers analyzers = buildAnalyzers(Settings.EMPTY)) {
            assertEquals(SENTENCE_WORDS, tokens(analyzers.get("smartcn"), "我们是中国人民的好朋友。"));
        }
    }

    @Test
    void tokenizerAloneKeepsThePunctuation() throws IOException {
        Settings analysis = Settings.builder()
                .put("index.analysis.analyzer.bare.type", "custom")
                .put("index.analysis.analyzer.bare.tokenizer", "smartcn_tokenizer")
                .build();
        try (IndexAnalyzers analyzers = buildAnalyzers(analysis)) {
            List<String> expected = new ArrayList<>(SENTENCE_WORDS);
            expected.add(",");
            assertEquals(expected, tokens(analyzers.get("bare"), "我们是中国人民的好朋友。"));
        }
    }

    @Test
    void tokenizerWithStopFilterMatchesTheAnalyzer() throws IOException {
        Settings analysis = Settings.builder()
                .put("index.analysis.analyzer.composed.type", "custom")
                .put("index.analysis.analyzer.composed.tokenizer", "smartcn_tokenizer")
                .putList("index.analysis.analyzer.composed.filter", "smartcn_stop")
                .build();
        try (IndexAnalyzers analyzers = buildAnalyzers(analysis)) {
            String text = "我们是中国人民的好朋友。";
            // The default _smartcn_ stop set removes the punctuation token and nothing else.
            assertEquals(SENTENCE_WORDS, tokens(analyzers.get("composed"), text));
            assertEquals(tokens(analyzers.get("smartcn"), text), tokens(analyzers.get("composed"), text));
        }
    }

    @Test
    void stopFilterRemovesConfiguredStopWords() throws IOException {
        Settings analysis = Settings.builder()
                .put("index.analysis.filter.no_function_words.type", "smartcn_stop")
                .putList("index.analysis.filter.no_function_words.stopwords", "是", "的")
                .put("index.analysis.analyzer.content_words.type", "custom")
                .put("index.analysis.analyzer.content_words.tokenizer", "smartcn_tokenizer")
                .putList("index.analysis.analyzer.content_words.filter", "no_function_words")
                .build();
        try (IndexAnalyzers analyzers = buildAnalyzers(analysis)) {
            assertEquals(
                    List.of("我们", "中国", "人民", "好", "朋友"),
                    tokens(analyzers.get("content_words"), SENTENCE));
        }
    }

    @Test
    void stopFilterKeepsATrailingStopWordWhenAskedTo() throws IOException {
        Settings analysis = Settings.builder()
                .put("index.analysis.filter.typing.type", "smartcn_stop")
                .putList("index.analysis.filter.typing.stopwords", "的")
                .put("index.analysis.filter.typing.remove_trailing", false)
                .put("index.analysis.analyzer.suggest.type", "custom")
                .put("index.analysis.analyzer.suggest.tokenizer", "smartcn_tokenizer")
                .putList("index.analysis.analyzer.suggest.filter", "typing")
                .build();
        try (IndexAnalyzers analyzers = buildAnalyzers(analysis)) {
            // The middle 的 goes; the last token stays, since the user may still be typing it.
            assertEquals(List.of("人民", "好", "的"), tokens(analyzers.get("suggest"), "人民的好的"));
        }
    }

    @Test
    void legacyNamesStillLoad() throws IOException {
        Settings analysis = Settings.builder()
                .put("index.analysis.analyzer.legacy.type", "custom")
                .put("index.analysis.analyzer.legacy.tokenizer", "smartcn_sentence")
                .putList("index.analysis.analyzer.legacy.filter", "smartcn_word")
                .build();
        try (IndexAnalyzers analyzers = buildAnalyzers(analysis)) {
            assertEquals(SENTENCE_WORDS, tokens(analyzers.get("legacy"), SENTENCE));
        }
    }

    private IndexAnalyzers buildAnalyzers(Settings analysis) throws IOException {
        Settings nodeSettings = Settings.builder().put("path.home", home.toString()).build();
        Environment environment = new Environment(nodeSettings, null);
        Settings indexSettings = Settings.builder()
                .put(IndexMetadata.SETTING_VERSION_CREATED, Version.CURRENT)
                .put(IndexMetadata.SETTING_NUMBER_OF_SHARDS, 1)
                .put(IndexMetadata.SETTING_NUMBER_OF_REPLICAS, 0)
                .put(analysis)
                .build();
        IndexMetadata metadata = IndexMetadata.builder("smartcn-test").settings(indexSettings).build();
        AnalysisModule module = new AnalysisModule(environment, List.of(new SmartcnAnalysisPlugin()));
        return module.getAnalysisRegistry().build(new IndexSettings(metadata, nodeSettings));
    }

    private static List<String> tokens(Analyzer analyzer, String text) throws IOException {
        List<String> terms = new ArrayList<>();
        try (TokenStream stream = analyzer.tokenStream("body", text)) {
            CharTermAttribute term = stream.addAttribute(CharTermAttribute.class);
            stream.reset();
            while (stream.incrementToken()) {
                terms.add(term.toString());
            }
            stream.end();
        }
        return terms;
    }
}
